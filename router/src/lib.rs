//! The ring (fixed partitions, deterministic claim, preference lists) and the replica scorer; pure logic, no I/O.
