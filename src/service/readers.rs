//! The read connections of the handlers, kept for the next request.
//!
//! Opening a connection costs a dozen statements (functions, scratch tables,
//! variables, macros); a report over a window costs a few dozen more. Up to
//! `MAX_IDLE` connections wait here between requests, so a report pays for
//! its queries only. More concurrent reads open more connections, which are
//! closed once `MAX_IDLE` are waiting.

use std::sync::{Arc, Mutex};

use crate::store::{Store, StoreError};

/// Read connections kept open between requests.
pub const MAX_IDLE: usize = 4;

pub struct Readers {
    /// The connection new ones are cloned from.
    base: Mutex<Store>,
    idle: Mutex<Vec<Store>>,
}

impl Readers {
    pub fn new(base: Store) -> Arc<Self> {
        Arc::new(Self { base: Mutex::new(base), idle: Mutex::new(Vec::new()) })
    }

    /// A connection of its own for one request, back here when dropped.
    pub fn take(self: &Arc<Self>) -> Result<Loan, StoreError> {
        let kept = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let store = match kept {
            Some(store) => store,
            None => self.base.lock().unwrap_or_else(|p| p.into_inner()).try_clone()?,
        };
        Ok(Loan { store: Some(store), readers: self.clone() })
    }
}

/// A read connection on loan from `Readers`.
pub struct Loan {
    store: Option<Store>,
    readers: Arc<Readers>,
}

impl std::borrow::Borrow<Store> for Loan {
    fn borrow(&self) -> &Store {
        self.store.as_ref().expect("a loan holds its store until dropped")
    }
}

impl Drop for Loan {
    fn drop(&mut self) {
        let Some(store) = self.store.take() else { return };
        // A read that failed (or panicked) may have left its transaction
        // open: such a connection is closed, not lent again.
        if store.rollback_open_transaction().is_err() {
            return;
        }
        let mut idle = self.readers.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < MAX_IDLE {
            idle.push(store);
        }
    }
}
