//! The binary's global allocator: mimalloc, asked for plain blocks whenever their natural
//! alignment suffices.
//!
//! The `mimalloc` crate's allocator always calls mimalloc's aligned entry points, which send
//! every block above 1 KiB, whatever its alignment, down a generic path; there, unless the block's
//! size class is a power of two of at most 4 KiB, it is over-allocated by the alignment and
//! placed inside. A replay allocates several such blocks per request (review bodies, TLS records,
//! report lines); mimalloc's own `malloc` serves them on its fast path.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys::{mi_free, mi_malloc, mi_malloc_aligned, mi_realloc, mi_realloc_aligned};
use libmimalloc_sys::{mi_zalloc, mi_zalloc_aligned};

/// Every block mimalloc hands out is aligned to at least a word: its size classes are whole
/// words, laid out from word-aligned page starts.
const MIN_ALIGN: usize = std::mem::size_of::<usize>();

/// mimalloc as the global allocator, plain entry points for word-aligned layouts.
pub struct Allocator;

// SAFETY: each method forwards to the mimalloc function of the same contract. Layouts aligned
// to a word or less go to the unaligned functions, whose blocks are always word-aligned
// (`MIN_ALIGN`); larger alignments go to the aligned functions. Every block, however it was
// obtained, is released by `mi_free`.
unsafe impl GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: plain FFI calls; mimalloc accepts any size and power-of-two alignment.
        unsafe {
            if layout.align() <= MIN_ALIGN {
                mi_malloc(layout.size()).cast()
            } else {
                mi_malloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        unsafe {
            if layout.align() <= MIN_ALIGN {
                mi_zalloc(layout.size()).cast()
            } else {
                mi_zalloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator, so from mimalloc.
        unsafe { mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from this allocator with `layout`; the new block keeps its
        // alignment by the same rule as `alloc`.
        unsafe {
            if layout.align() <= MIN_ALIGN {
                mi_realloc(ptr.cast::<c_void>(), new_size).cast()
            } else {
                mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    /// Sizes around mimalloc's small-block limit and size-class edges, every alignment a type can
    /// ask for up to a page.
    #[test]
    fn blocks_keep_their_alignment_and_contents() {
        use super::Allocator;
        use std::alloc::{GlobalAlloc, Layout};

        let sizes = [1, 7, 8, 9, 24, 100, 1023, 1024, 1025, 3000, 4096, 70_000];
        for align in [1, 2, 4, 8, 16, 32, 64, 128, 4096] {
            for size in sizes {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: non-zero sizes; every block is released with its layout.
                unsafe {
                    let zeroed = Allocator.alloc_zeroed(layout);
                    assert!(!zeroed.is_null());
                    assert_eq!(zeroed as usize % align, 0, "zeroed {size} aligned {align}");
                    assert!(
                        std::slice::from_raw_parts(zeroed, size)
                            .iter()
                            .all(|&b| b == 0)
                    );
                    Allocator.dealloc(zeroed, layout);

                    let block = Allocator.alloc(layout);
                    assert_eq!(block as usize % align, 0, "{size} aligned {align}");
                    for i in 0..size {
                        block.add(i).write(i as u8);
                    }
                    let grown = Allocator.realloc(block, layout, size * 3);
                    assert_eq!(grown as usize % align, 0, "{size} grown, aligned {align}");
                    assert!((0..size).all(|i| grown.add(i).read() == i as u8));
                    let grown_layout = Layout::from_size_align(size * 3, align).unwrap();
                    let shrunk = Allocator.realloc(grown, grown_layout, size / 2 + 1);
                    assert_eq!(shrunk as usize % align, 0, "{size} shrunk, aligned {align}");
                    assert!((0..size / 2 + 1).all(|i| shrunk.add(i).read() == i as u8));
                    Allocator.dealloc(
                        shrunk,
                        Layout::from_size_align(size / 2 + 1, align).unwrap(),
                    );
                }
            }
        }
    }
}
