//! Go's `sort.SliceStable` step for step (insertion sort on blocks of 20, then `symMerge`), so that
//! upstream's comparators — which are not always consistent orders — give the same permutation.
//! A comparator error stops the sort at once, as a Go panic would.

const BLOCK_SIZE: usize = 20;

/// Sorts `data` as `sort.SliceStable(data, less)` does.
pub(crate) fn slice_stable<T, E>(
    data: &mut [T],
    less: &mut impl FnMut(&T, &T) -> Result<bool, E>,
) -> Result<(), E> {
    let n = data.len();
    let (mut a, mut b) = (0, BLOCK_SIZE);
    while b <= n {
        insertion_sort(data, a, b, less)?;
        a = b;
        b += BLOCK_SIZE;
    }
    insertion_sort(data, a, n, less)?;
    let mut block = BLOCK_SIZE;
    while block < n {
        let (mut a, mut b) = (0, 2 * block);
        while b <= n {
            sym_merge(data, a, a + block, b, less)?;
            a = b;
            b += 2 * block;
        }
        let m = a + block;
        if m < n {
            sym_merge(data, a, m, n, less)?;
        }
        block *= 2;
    }
    Ok(())
}

fn insertion_sort<T, E>(
    data: &mut [T],
    a: usize,
    b: usize,
    less: &mut impl FnMut(&T, &T) -> Result<bool, E>,
) -> Result<(), E> {
    for i in a + 1..b {
        let mut j = i;
        while j > a && less(&data[j], &data[j - 1])? {
            data.swap(j, j - 1);
            j -= 1;
        }
    }
    Ok(())
}

fn sym_merge<T, E>(
    data: &mut [T],
    a: usize,
    m: usize,
    b: usize,
    less: &mut impl FnMut(&T, &T) -> Result<bool, E>,
) -> Result<(), E> {
    if m - a == 1 {
        let (mut i, mut j) = (m, b);
        while i < j {
            let h = (i + j) / 2;
            if less(&data[h], &data[a])? {
                i = h + 1;
            } else {
                j = h;
            }
        }
        for k in a..i.saturating_sub(1) {
            data.swap(k, k + 1);
        }
        return Ok(());
    }
    if b - m == 1 {
        let (mut i, mut j) = (a, m);
        while i < j {
            let h = (i + j) / 2;
            if !less(&data[m], &data[h])? {
                i = h + 1;
            } else {
                j = h;
            }
        }
        let mut k = m;
        while k > i {
            data.swap(k, k - 1);
            k -= 1;
        }
        return Ok(());
    }
    let mid = (a + b) / 2;
    let n = mid + m;
    let (mut start, mut r) = if m > mid { (n - b, mid) } else { (a, m) };
    let p = n - 1;
    while start < r {
        let c = (start + r) / 2;
        if !less(&data[p - c], &data[c])? {
            start = c + 1;
        } else {
            r = c;
        }
    }
    let end = n - start;
    if start < m && m < end {
        rotate(data, start, m, end);
    }
    if a < start && start < mid {
        sym_merge(data, a, start, mid, less)?;
    }
    if mid < end && end < b {
        sym_merge(data, mid, end, b, less)?;
    }
    Ok(())
}

/// Go's `rotate`: block swaps, which give the same result as a rotation.
fn rotate<T>(data: &mut [T], a: usize, m: usize, b: usize) {
    data[a..b].rotate_left(m - a);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_stably() {
        let mut v: Vec<(u32, usize)> = (0..100).map(|i| ((i * 7919 % 13) as u32, i)).collect();
        let mut expected = v.clone();
        expected.sort_by_key(|e| e.0);
        slice_stable(&mut v, &mut |x: &(u32, usize), y: &(u32, usize)| {
            Ok::<_, ()>(x.0 < y.0)
        })
        .ok();
        assert_eq!(v, expected);
    }

    #[test]
    fn always_true_reverses_short_input() {
        let mut v = vec![1, 2, 3, 4];
        slice_stable(&mut v, &mut |_: &i32, _: &i32| Ok::<_, ()>(true)).ok();
        assert_eq!(v, vec![4, 3, 2, 1]);
    }
}
