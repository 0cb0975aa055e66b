//! The bytes of write requests held at once, across HTTP and gRPC: raw
//! bodies while they arrive, inflated bodies until they are decoded, and
//! what is kept of them once decoded, until their answer. A request that
//! would take the budget past its size is answered 503 / UNAVAILABLE with a
//! retry delay, so memory stays bounded however many clients send, and
//! however large their bodies (each at most the body limit).

use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

#[derive(Clone, Debug)]
pub struct ByteBudget {
    bytes: Arc<Semaphore>,
    capacity: usize,
}

/// Bytes one request holds; returned to the budget when dropped.
#[derive(Debug, Default)]
pub struct Held(Option<OwnedSemaphorePermit>);

impl ByteBudget {
    pub fn new(bytes: usize) -> Self {
        let capacity = bytes.min(Semaphore::MAX_PERMITS);
        ByteBudget { bytes: Arc::new(Semaphore::new(capacity)), capacity }
    }

    /// Adds `n` bytes to `held`; false, holding nothing more, when the
    /// budget has no room for them now.
    pub fn take(&self, held: &mut Held, n: usize) -> bool {
        if n == 0 {
            return true;
        }
        let Ok(n) = u32::try_from(n) else { return false };
        match self.bytes.clone().try_acquire_many_owned(n) {
            Ok(permit) => {
                match &mut held.0 {
                    Some(existing) => existing.merge(permit),
                    None => held.0 = Some(permit),
                }
                true
            }
            Err(_) => false,
        }
    }

    /// The budget's size: no request may ever hold more.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes free now (for /metrics and tests).
    pub fn available(&self) -> usize {
        self.bytes.available_permits()
    }
}

impl Held {
    /// Gives `n` of the held bytes back (a raw body once it is inflated).
    pub fn release(&mut self, n: usize) {
        if let Some(permit) = &mut self.0 {
            if n >= permit.num_permits() {
                self.0 = None;
            } else {
                drop(permit.split(n));
            }
        }
    }

    pub fn bytes(&self) -> usize {
        self.0.as_ref().map_or(0, OwnedSemaphorePermit::num_permits)
    }
}

/// What one request holds, shared by the layer that reads its body and
/// the handler that decodes it (the one reaches the other through the
/// request's extensions).
#[derive(Clone, Debug, Default)]
pub struct SharedHeld(Arc<Mutex<Held>>);

impl SharedHeld {
    /// `ByteBudget::take` for this request.
    pub fn take(&self, budget: &ByteBudget, n: usize) -> bool {
        budget.take(&mut self.lock(), n)
    }

    pub fn release(&self, n: usize) {
        self.lock().release(n);
    }

    pub fn bytes(&self) -> usize {
        self.lock().bytes()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        // A panic elsewhere while holding it leaves a count still worth reading.
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_taken_up_to_the_budget_and_come_back_when_released_or_dropped() {
        let budget = ByteBudget::new(100);
        let mut first = Held::default();
        assert!(budget.take(&mut first, 60));
        assert!(budget.take(&mut first, 30));
        let mut second = Held::default();
        assert!(!budget.take(&mut second, 20), "90 of 100 are held");
        assert_eq!(second.bytes(), 0);
        first.release(50);
        assert_eq!((first.bytes(), budget.available()), (40, 60));
        assert!(budget.take(&mut second, 60));
        drop(first);
        drop(second);
        assert_eq!(budget.available(), 100);
        assert!(!budget.take(&mut Held::default(), usize::MAX), "more than the budget is never granted");
    }
}
