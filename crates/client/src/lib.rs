//! The async client library of the store.
