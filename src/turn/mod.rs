//! One turn.
