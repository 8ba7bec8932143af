//! Path containment policy (spec §3.8). See `tools::write_file::contain_file` until it moves here.
