//! `Shared`: a value borrowed, or held through an `Arc`, behind one type,
//! so the engine and the tokenizer's stream decoder serve both tests that
//! borrow a model and sessions that must own what they use.

use std::ops::Deref;
use std::sync::Arc;

/// A `&T` or an `Arc<T>`: borrowed by tests and tools, shared by a
/// `Session`, which lives as long as its owner wants.
pub enum Shared<'a, T> {
    Borrowed(&'a T),
    Owned(Arc<T>),
}

impl<T> Deref for Shared<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        match self {
            Shared::Borrowed(t) => t,
            Shared::Owned(t) => t,
        }
    }
}

impl<T> Clone for Shared<'_, T> {
    fn clone(&self) -> Self {
        match self {
            Shared::Borrowed(t) => Shared::Borrowed(t),
            Shared::Owned(t) => Shared::Owned(t.clone()),
        }
    }
}

impl<'a, T> From<&'a T> for Shared<'a, T> {
    fn from(t: &'a T) -> Self {
        Shared::Borrowed(t)
    }
}

impl<T> From<Arc<T>> for Shared<'_, T> {
    fn from(t: Arc<T>) -> Self {
        Shared::Owned(t)
    }
}
