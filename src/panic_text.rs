//! The message of a caught panic, for the error the host is given instead of the unwinding.

use std::any::Any;

/// The panic's `&str` or `String` payload; anything else is `unknown panic`.
pub(crate) fn panic_text(payload: Box<dyn Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::panic_text;

    #[test]
    fn names_str_and_string_payloads() {
        let caught = |f: fn()| std::panic::catch_unwind(f).unwrap_err();
        assert_eq!(panic_text(caught(|| panic!("static text"))), "static text");
        assert_eq!(
            panic_text(caught(|| panic!("{} text", "formatted"))),
            "formatted text"
        );
        assert_eq!(
            panic_text(caught(|| std::panic::panic_any(7_u8))),
            "unknown panic"
        );
    }
}
