pub(crate) mod background;
