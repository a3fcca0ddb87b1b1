//! Multi-node black-box tests that start real kvnode processes.
