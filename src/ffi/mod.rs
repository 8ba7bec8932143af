//! C boundary.
