//! A one-place mailbox between the log and one of its background threads
//! (the snapshot writer, the sync-mark writer): a newer item replaces one
//! not yet taken, so the mailbox is bounded whatever the rate of puts, and
//! the thread always writes the newest. Both kinds of item are whole
//! states (a snapshot covers every older one; a set of sync marks every
//! older set), so skipping one loses nothing.

pub(super) struct Mailbox<T> {
    /// The waiting item, and whether the log was dropped.
    state: std::sync::Mutex<(Option<T>, bool)>,
    ready: std::sync::Condvar,
}

impl<T> Default for Mailbox<T> {
    fn default() -> Self {
        Mailbox {
            state: std::sync::Mutex::new((None, false)),
            ready: std::sync::Condvar::new(),
        }
    }
}

impl<T> Mailbox<T> {
    pub(super) fn put(&self, item: T) {
        if let Ok(mut s) = self.state.lock() {
            s.0 = Some(item);
            self.ready.notify_one();
        }
    }

    pub(super) fn close(&self) {
        if let Ok(mut s) = self.state.lock() {
            s.1 = true;
            self.ready.notify_one();
        }
    }

    /// The next item; `None` once closed and empty.
    pub(super) fn take(&self) -> Option<T> {
        let mut s = self.state.lock().ok()?;
        loop {
            if let Some(item) = s.0.take() {
                return Some(item);
            }
            if s.1 {
                return None;
            }
            s = self.ready.wait(s).ok()?;
        }
    }
}
