//! kvnode: one node of the store.
fn main() {}
