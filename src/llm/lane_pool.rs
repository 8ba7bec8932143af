//! The idle connections that freed agents leave to the next agents on the same endpoint. A
//! host that makes an agent per task otherwise opens a connection for every task, though the
//! process talked to the same server a moment ago (a TCP handshake and the server's accept on
//! every first turn).
//!
//! Bounded three ways, so a process that frees many agents keeps little: at most
//! [`PER_ENDPOINT`] connections per endpoint and [`OVERALL`] in all (the oldest go first: the
//! newest are the least likely to have been closed by the server's own idle limit), and none
//! older than the lane's idle limit (90 s, as reqwest's pool). There is no timer: expired
//! entries are closed at the pool's next use, so at most the caps' worth of sockets outlive
//! their limit in a process that stops making requests.
//!
//! Generic over the key and the connection so its rules are tested without sockets; the lane
//! ([`super::http_lane`]) keys it by its connect target and keeps plain sockets in it.

use std::time::{Duration, Instant};

/// Connections kept per endpoint: a host running a few agents at once on one endpoint and
/// replacing them finds a connection for each, up to this many at a time. A bound, not a
/// goal: each kept socket is a file descriptor of the host and a connection the server holds.
pub(crate) const PER_ENDPOINT: usize = 8;

/// Connections kept for all endpoints together (a main model, a sub-agents' model, a few
/// more), so the descriptors the library keeps idle stay a small, known number.
pub(crate) const OVERALL: usize = 32;

struct Entry<K, C> {
    key: K,
    conn: C,
    /// When the connection's last response ended.
    since: Instant,
}

/// Idle connections by key, oldest first.
pub(crate) struct IdlePool<K, C> {
    entries: Vec<Entry<K, C>>,
    per_key: usize,
    overall: usize,
    idle_limit: Duration,
}

impl<K: PartialEq, C> IdlePool<K, C> {
    pub(crate) const fn new(per_key: usize, overall: usize, idle_limit: Duration) -> Self {
        IdlePool {
            entries: Vec::new(),
            per_key,
            overall,
            idle_limit,
        }
    }

    /// Keeps `conn`, idle since `since`, for `key`. Returns what leaves the pool (expired,
    /// or pushed out by the caps, or `conn` itself when it is already too old), for the caller
    /// to close after it let go of the pool's lock.
    #[must_use = "the connections returned are closed when dropped, outside the lock"]
    pub(crate) fn put(&mut self, key: K, conn: C, since: Instant, now: Instant) -> Vec<C> {
        let mut gone = self.expire(now);
        if now.saturating_duration_since(since) >= self.idle_limit
            || self.per_key == 0
            || self.overall == 0
        {
            gone.push(conn);
            return gone;
        }
        if self.entries.iter().filter(|e| e.key == key).count() >= self.per_key {
            if let Some(i) = self.entries.iter().position(|e| e.key == key) {
                gone.push(self.entries.remove(i).conn);
            }
        }
        if self.entries.len() >= self.overall {
            gone.push(self.entries.remove(0).conn);
        }
        // Kept in order of `since`, so the expired ones are always a prefix.
        let at = self.entries.partition_point(|e| e.since <= since);
        self.entries.insert(at, Entry { key, conn, since });
        gone
    }

    /// The newest idle connection for `key`, if any; the expired ones leave with it.
    pub(crate) fn take(&mut self, key: &K, now: Instant) -> (Option<C>, Vec<C>) {
        let gone = self.expire(now);
        let found = self
            .entries
            .iter()
            .rposition(|e| e.key == *key)
            .map(|i| self.entries.remove(i).conn);
        (found, gone)
    }

    fn expire(&mut self, now: Instant) -> Vec<C> {
        let n = self
            .entries
            .partition_point(|e| now.saturating_duration_since(e.since) >= self.idle_limit);
        self.entries.drain(..n).map(|e| e.conn).collect()
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    #[cfg(test)]
    pub(crate) fn count(&self, key: &K) -> usize {
        self.entries.iter().filter(|e| e.key == *key).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: Duration = Duration::from_secs(90);

    fn pool() -> IdlePool<&'static str, u32> {
        IdlePool::new(2, 3, LIMIT)
    }

    #[test]
    fn the_newest_connection_of_the_key_is_taken_and_other_keys_never_share() {
        let mut p = pool();
        let t = Instant::now();
        assert!(p.put("a", 1, t, t).is_empty());
        assert!(p.put("b", 2, t, t).is_empty());
        assert!(p.put("a", 3, t + Duration::from_secs(1), t).is_empty());
        assert_eq!(p.take(&"c", t).0, None);
        assert_eq!(p.take(&"a", t).0, Some(3));
        assert_eq!(p.take(&"a", t).0, Some(1));
        assert_eq!(p.take(&"a", t).0, None);
        assert_eq!(p.take(&"b", t).0, Some(2));
        assert_eq!(p.len(), 0);
    }

    #[test]
    fn the_caps_push_out_the_oldest() {
        let mut p = pool();
        let t = Instant::now();
        let s = |n: u64| t + Duration::from_secs(n);
        assert!(p.put("a", 1, s(0), s(0)).is_empty());
        assert!(p.put("a", 2, s(1), s(1)).is_empty());
        // Per key: the third `a` pushes out the first.
        assert_eq!(p.put("a", 3, s(2), s(2)), vec![1]);
        assert_eq!(p.len(), 2);
        assert!(p.put("b", 4, s(3), s(3)).is_empty());
        // Overall: a fourth entry pushes out the oldest of any key.
        assert_eq!(p.put("c", 5, s(4), s(4)), vec![2]);
        assert_eq!(p.len(), 3);
        assert_eq!(p.take(&"a", s(4)).0, Some(3));
        assert_eq!(p.take(&"a", s(4)).0, None);
    }

    #[test]
    fn connections_idle_past_the_limit_are_never_handed_out() {
        let mut p = pool();
        let t = Instant::now();
        assert!(p.put("a", 1, t, t).is_empty());
        assert!(p.put("b", 2, t + Duration::from_secs(10), t).is_empty());
        // One already too old is given back at once.
        assert_eq!(p.put("a", 3, t, t + LIMIT), vec![1, 3]);
        let (found, gone) = p.take(&"b", t + LIMIT + Duration::from_secs(10));
        assert_eq!((found, gone), (None, vec![2]));
        assert_eq!(p.len(), 0);
    }

    #[test]
    fn an_older_connection_put_later_keeps_the_order_of_idle_time() {
        let mut p = pool();
        let t = Instant::now();
        assert!(p.put("a", 1, t + Duration::from_secs(5), t).is_empty());
        assert!(p.put("b", 2, t, t).is_empty());
        // `b` (idle since t) expires first although it came in second.
        let (_, gone) = p.take(&"x", t + LIMIT);
        assert_eq!(gone, vec![2]);
        assert_eq!(p.take(&"a", t + LIMIT).0, Some(1));
    }

    #[test]
    fn a_pool_without_room_keeps_nothing() {
        let t = Instant::now();
        for (per_key, overall) in [(0, 0), (0, 3), (2, 0)] {
            let mut p: IdlePool<&str, u32> = IdlePool::new(per_key, overall, LIMIT);
            assert_eq!(p.put("a", 1, t, t), vec![1]);
            assert_eq!(p.take(&"a", t).0, None);
        }
    }
}
