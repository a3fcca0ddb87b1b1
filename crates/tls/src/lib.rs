//! Cluster certificates (rcgen) and rustls configurations with role checks for mutual TLS.
