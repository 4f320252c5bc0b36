//! A global allocator for benches: the binary's allocator (`src/allocator.rs`, mimalloc) with the live total of
//! allocated bytes counted.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicIsize, Ordering};

/// The binary's allocator, with the live total counted.
pub struct Counting;

pub static LIVE: AtomicIsize = AtomicIsize::new(0);
static INNER: crate::allocator::Allocator = crate::allocator::Allocator;

// SAFETY: every call is forwarded to the binary's allocator unchanged; only a counter is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on.
        unsafe { INNER.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on.
        unsafe { INNER.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on.
        unsafe { INNER.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: the caller's contract is passed on.
        unsafe { INNER.realloc(ptr, layout, new_size) }
    }
}

/// Bytes allocated and not yet freed.
pub fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}
