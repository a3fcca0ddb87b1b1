//! Builders shared by the integration tests.

#![allow(dead_code)]

use kv_types::{Actor, NodeId, Object, Sibling, VersionVector};

/// The actor of node `node{i}`, incarnation 1.
pub fn actor(i: usize) -> Actor {
    Actor {
        node: NodeId::new(format!("node{i}")).unwrap(),
        incarnation: 1,
    }
}

/// A sibling holding `data`.
pub fn value(data: &[u8]) -> Sibling {
    Sibling {
        data: Some(data.to_vec()),
        written_at_ms: 0,
    }
}

/// A fresh object: one blind write of `data` by `actor(i)`.
pub fn blind(i: usize, data: &[u8]) -> Object {
    Object::new().update(&VersionVector::new(), &actor(i), value(data))
}

/// `stored` overwritten by `actor(i)` with the full context (supersedes
/// every current sibling).
pub fn overwrite(stored: &Object, i: usize, data: Option<&[u8]>) -> Object {
    let sibling = Sibling {
        data: data.map(<[u8]>::to_vec),
        written_at_ms: 1,
    };
    stored.update(&stored.join(), &actor(i), sibling)
}

/// The live values of `object`, sorted.
pub fn values(object: &Object) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = object.live_values().map(<[u8]>::to_vec).collect();
    v.sort();
    v
}

/// Runs `f` to completion on this thread (parks until woken): enough to
/// await a [`kv_storage::Durable`] without an async runtime.
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    use std::sync::Arc;
    use std::task::{Context, Poll, Wake, Waker};
    struct ThreadWaker(std::thread::Thread);
    impl Wake for ThreadWaker {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}
