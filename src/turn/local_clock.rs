//! The host's local date and time for the user message's reminder, with the zone's offset asked
//! of chrono once a minute. `chrono::Local::now` looks at the `TZ` variable (under the
//! environment's lock) and at the zone file on every call, and re-reads the zone when a second
//! has passed since its last look: ~1.4k instructions of a ~66k one-request turn. The offset
//! itself changes only at a zone's transitions, which fall on whole minutes, so the offset of the
//! minute the clock is in is kept with that minute and used until the clock leaves it.

use std::sync::Mutex;

use chrono::{DateTime, FixedOffset, Local, NaiveDateTime, Offset, TimeZone, Utc};

/// The UTC minute (seconds since the epoch / 60) and the local offset in it.
type KeptOffset = Mutex<Option<(i64, FixedOffset)>>;

/// The process's: the zone is the process's.
static OFFSET_OF_MINUTE: KeptOffset = Mutex::new(None);

/// The local date and time now.
pub(crate) fn now() -> NaiveDateTime {
    at(&OFFSET_OF_MINUTE, Utc::now(), |utc| {
        Local.offset_from_utc_datetime(&utc.naive_utc()).fix()
    })
}

/// The local time of `utc`, the offset of its minute asked of `zone` unless `kept` has it.
fn at(
    kept: &KeptOffset,
    utc: DateTime<Utc>,
    zone: impl FnOnce(&DateTime<Utc>) -> FixedOffset,
) -> NaiveDateTime {
    let minute = utc.timestamp().div_euclid(60);
    let mut kept = kept.lock().unwrap_or_else(|e| e.into_inner());
    let offset = match *kept {
        Some((m, offset)) if m == minute => offset,
        _ => {
            let offset = zone(&utc);
            *kept = Some((minute, offset));
            offset
        }
    };
    drop(kept);
    utc.with_timezone(&offset).naive_local()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The offset is kept for its minute only: a transition (here a made-up zone's) is seen
    /// from the next minute on, and every time is the zone's own local time.
    #[test]
    fn the_offset_is_asked_once_a_minute_and_local_time_follows_the_zone() {
        let kept = KeptOffset::default();
        let plus_one = FixedOffset::east_opt(3600).unwrap();
        let plus_two = FixedOffset::east_opt(7200).unwrap();
        let t0 = Utc.with_ymd_and_hms(2026, 3, 29, 0, 59, 10).unwrap();
        let asked = std::cell::Cell::new(0);
        let ask = |o: FixedOffset| {
            asked.set(asked.get() + 1);
            move |_: &DateTime<Utc>| o
        };
        let local = |utc, zone| at(&kept, utc, zone).to_string();
        assert_eq!(local(t0, ask(plus_one)), "2026-03-29 01:59:10");
        // Within the minute the zone is not asked.
        let same_minute = t0 + chrono::Duration::seconds(49);
        assert_eq!(
            at(&kept, same_minute, |_| panic!("asked within the minute")).to_string(),
            "2026-03-29 01:59:59"
        );
        let next_minute = t0 + chrono::Duration::seconds(50);
        assert_eq!(local(next_minute, ask(plus_two)), "2026-03-29 03:00:00");
        assert_eq!(asked.get(), 2);
        // The clock going back (a host's clock set) is another minute: asked again.
        assert_eq!(local(t0, ask(plus_one)), "2026-03-29 01:59:10");
        assert_eq!(asked.get(), 3);

        // The real zone: the same local time chrono gives, to the second.
        let ours = now();
        let chrono_now = Local::now().naive_local();
        let apart = (chrono_now - ours).num_seconds().abs();
        assert!(apart <= 2, "{ours} vs {chrono_now}");
    }
}
