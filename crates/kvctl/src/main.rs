//! kvctl: the command-line client.
fn main() {}
