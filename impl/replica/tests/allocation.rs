//! A length prefix alone allocates nothing: frames are checked against
//! their cap before any allocation, and bodies are allocated as their bytes
//! arrive. Measured with a counting allocator: the largest single
//! allocation made on this thread while a reader faces a 512 MiB prefix.

// Test code: unwrap, expect and panic are how a test fails (the
// workspace lints deny them in the code under test).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// The counting allocator below is unsafe code by nature.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use stutter_replica::peer_auth::{self, ClusterKey};
use stutter_replica::{text, wire};

struct Counting;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded unchanged to the system allocator; the
// thread-local maximum touches no memory it hands out.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = LARGEST.try_with(|l| l.set(l.get().max(layout.size())));
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = LARGEST.try_with(|l| l.set(l.get().max(new_size)));
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// The largest allocation `f` made on this thread.
fn largest_allocation(f: impl FnOnce()) -> usize {
    LARGEST.with(|l| l.set(0));
    f();
    LARGEST.with(|l| l.get())
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
        .block_on(f)
}

const PREFIX_512_MIB: [u8; 4] = (512u32 << 20).to_be_bytes();

/// A stream that announces 512 MiB and sends 1,000 bytes of it.
fn announced_but_short() -> Vec<u8> {
    let mut b = PREFIX_512_MIB.to_vec();
    b.extend_from_slice(&[7u8; 1000]);
    b
}

#[test]
fn a_512_mib_prefix_allocates_nothing_under_any_cap() {
    let stream = announced_but_short();
    // Under the default caps (4 MiB clients, 256 MiB peers): refused at once.
    let used = largest_allocation(|| {
        block_on(async {
            assert!(wire::read_frame(&mut &stream[..], wire::MAX_CLIENT_FRAME)
                .await
                .is_err());
            let mut opener = test_opener().await;
            let mut buf = Vec::new();
            assert!(
                peer_auth::read_sealed(&mut &stream[..], &mut opener, 256 << 20, &mut buf)
                    .await
                    .is_err()
            );
        })
    });
    assert!(used < 64 << 10, "largest allocation {used} bytes");
    // Under a cap that admits it: still only what arrived (a chunk ahead).
    let used = largest_allocation(|| {
        block_on(async {
            let r = wire::read_frame(&mut &stream[..], 1 << 30).await;
            assert_eq!(
                r.err().map(|e| e.kind()),
                Some(std::io::ErrorKind::UnexpectedEof)
            );
            let mut opener = test_opener().await;
            let mut buf = Vec::new();
            assert!(
                peer_auth::read_sealed(&mut &stream[..], &mut opener, 1 << 30, &mut buf)
                    .await
                    .is_err()
            );
        })
    });
    assert!(
        used <= 2 * wire::READ_CHUNK,
        "largest allocation {used} bytes"
    );
}

#[test]
fn a_long_text_line_allocates_only_what_arrived() {
    let mut stream = PREFIX_512_MIB.to_vec();
    stream.extend_from_slice(&[b'x'; 3000]);
    let used = largest_allocation(|| {
        block_on(async {
            let mut r = tokio::io::BufReader::new(&stream[..]);
            let mut line = Vec::new();
            assert_eq!(
                text::read_line(&mut r, 4 << 20, &mut line).await.ok(),
                Some(text::Line::Request)
            );
        })
    });
    assert!(used < 64 << 10, "largest allocation {used} bytes");
}

/// The opener of a session made by a real handshake over an in-memory pipe.
async fn test_opener() -> peer_auth::FrameOpener {
    let key = ClusterKey::new(Some(b"allocation test secret"));
    let (mut a, mut b) = tokio::io::duplex(4096);
    let (d, acc) = tokio::join!(
        peer_auth::dial(&mut a, &key, 1, 0),
        peer_auth::accept(&mut b, &key, 0, 3)
    );
    assert!(d.is_ok());
    acc.expect("accept").1
}
