// A Rust program whose time goes to hot::spin_hot, called from <hot::Grid<u32>>::walk:
// run.sh's demangle scenario profiles it built with legacy and with v0 symbol mangling.
// MS as its first argument.
use std::time::{Duration, Instant};

#[inline(never)]
fn spin_hot(n: u64) -> u64 {
    let mut x = n;
    for i in 0..n {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
    }
    x
}

pub struct Grid<T> {
    v: Vec<T>,
}

impl<T: Copy + Into<u64>> Grid<T> {
    #[inline(never)]
    pub fn walk(&self) -> u64 {
        self.v.iter().map(|&x| spin_hot(std::hint::black_box(x.into()))).fold(0, u64::wrapping_add)
    }
}

fn main() {
    let ms: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(1000);
    let end = Instant::now() + Duration::from_millis(ms);
    let g = Grid { v: vec![100000u32; 10] };
    let mut sum = 0u64;
    while Instant::now() < end {
        sum = sum.wrapping_add(g.walk());
    }
    // Kept, not printed: the profile's report is on the same standard output.
    std::hint::black_box(sum);
}
