//! Agave's program cache as the lab plays it: a stream of program invocations against a
//! cache of the image's capacity (`MAX_LOADED_ENTRY_COUNT`), evicting the way Agave does,
//! so misses, evictions and the time spent loading emerge from the mechanism.
//!
//! The mechanism (anza-xyz/agave v2.1.14, program-runtime/src/loaded_programs.rs and
//! svm/src/transaction_processor.rs; docs/lab.md):
//! - programs are looked up once per batch (hits and misses count unique programs per
//!   batch); a miss compiles the program and inserts it (or reloads an unloaded entry);
//! - after a batch that loaded a missing program, `evict_using_2s_random_selection`
//!   shrinks the loaded entries to 90% of the capacity: it picks two loaded entries at
//!   random and unloads the one with the lower decayed usage (`tx_usage_counter >>
//!   slots since its last access`; a tie unloads the second);
//! - `tx_usage_counter` grows by the transactions of the batch that use the program.
//!
//! The stream: a fixed set of programs, a few hot and a long tail (a power law over
//! ranks), each batch drawing its programs from it; programs also go dormant and wake in
//! episodes (a token launch, a market's hours), which is what makes a small cache churn.
//! Calibrated on the paper's Figure 12 (seed 000): 512, 1,024 and 2,048 entries give
//! about 0.85, 0.09 and 0.02 misses per slot, 0.84, 0.08 and 0 evictions, and 40, 15 and
//! 13 ms in the program cache per slot.

use std::sync::Mutex;

use super::super::mix;

/// Programs invoked on the chain in half a day.
const PROGRAMS: usize = 1_700;
/// The power law of popularity over ranks.
const SKEW: f64 = 1.3;
/// Batches per slot, and program draws per batch (the transactions' programs).
const BATCHES_PER_SLOT: u32 = 16;
const DRAWS_PER_BATCH: u32 = 8;
/// Transactions of a slot (mainnet: about 1,900 at 4,800 TPS, votes included).
const TXS_PER_DRAW: u64 = 15;
/// Built-in programs: in the cache from the start, never evicted, counted as hits on
/// every batch by v2.x (transaction_processor.rs adds every builtin to each batch).
const BUILTINS: u64 = 8;
/// Slots a program stays awake or dormant, on average (the episodes).
const EPISODE_SLOTS: f64 = 5_500.0;
/// Share of the tail (below the hot head) awake at any time.
const AWAKE: f64 = 0.27;
/// Ranks that are always awake.
const HEAD: usize = 150;
/// Time in the program cache: a fixed part per slot (lookups, the batch-local caches)
/// and the compile and JIT of each miss, in microseconds.
const BASE_US: f64 = 12_300.0;
const LOAD_US: f64 = 33_000.0;
/// Agave shrinks the loaded entries to this share of the capacity.
const SHRINK_TO: f64 = 0.9;
/// Buckets of the draw's guide table.
const GUIDE: usize = 8_192;

/// What one slot adds to `loaded-programs-cache-stats` and `replay-slot-stats`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SlotStats {
    pub hits: i64,
    pub misses: i64,
    pub evictions: i64,
    pub reloads: i64,
    pub insertions: i64,
    pub one_hit_wonders: i64,
    /// Loaded entries before the slot's last eviction (0 when none ran, as in Agave).
    pub water_level: i64,
    pub program_cache_us: i64,
}

/// The cache over the slots replayed so far.
#[derive(Debug, Clone)]
struct Run {
    /// Slots done.
    slot: u64,
    /// Loaded program ids (the eviction candidates), and each program's index in it.
    loaded: Vec<u32>,
    index: Vec<Option<u32>>,
    /// Whether the program was ever loaded (a later miss is a reload of its entry).
    seen: Vec<bool>,
    usage: Vec<u64>,
    last_access: Vec<u64>,
    /// Each program's episode last asked about and whether it is awake in it (a cache:
    /// [`ProgramCache::awake`] is drawn per candidate, episodes last thousands of slots).
    episode: Vec<(u64, bool)>,
    rng: u64,
}

impl Run {
    fn new(seed: u64) -> Self {
        Run {
            slot: 0,
            loaded: Vec::new(),
            index: vec![None; PROGRAMS],
            seen: vec![false; PROGRAMS],
            usage: vec![0; PROGRAMS],
            last_access: vec![0; PROGRAMS],
            episode: vec![(u64::MAX, false); PROGRAMS],
            rng: seed,
        }
    }

    fn next(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(1);
        mix(self.rng)
    }

    fn uniform(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn decayed(&self, p: usize) -> u64 {
        let idle = self.slot.saturating_sub(self.last_access[p]).min(63);
        self.usage[p] >> idle
    }

    /// Unloads entries, two random candidates at a time, down to `keep`.
    fn evict(&mut self, keep: usize, stats: &mut SlotStats) {
        if self.loaded.len() <= keep {
            return;
        }
        stats.water_level = self.loaded.len() as i64;
        while self.loaded.len() > keep {
            let n = self.loaded.len() as u64;
            let (i, j) = ((self.next() % n) as usize, (self.next() % n) as usize);
            let (a, b) = (self.loaded[i] as usize, self.loaded[j] as usize);
            let (victim, at) = if self.decayed(a) < self.decayed(b) {
                (a, i)
            } else {
                (b, j)
            };
            self.loaded.swap_remove(at);
            if let Some(&moved) = self.loaded.get(at) {
                self.index[moved as usize] = Some(at as u32);
            }
            self.index[victim] = None;
            stats.evictions += 1;
            if self.usage[victim] == 1 {
                stats.one_hit_wonders += 1;
            }
        }
    }
}

/// The program cache of one validator process.
pub struct ProgramCache {
    seed: u64,
    capacity: usize,
    /// Cumulative popularity of the ranks (the power law).
    cdf: Vec<f64>,
    /// `guide[k]`: the first rank whose cumulative popularity reaches `k / GUIDE`, so a
    /// draw scans a few ranks instead of searching all of them (the same rank).
    guide: Vec<u32>,
    /// Each program's offset of its episodes, in slots.
    offsets: Vec<u64>,
    run: Mutex<Run>,
}

impl ProgramCache {
    pub fn new(seed: u64, capacity: usize) -> Self {
        let weights: Vec<f64> = (1..=PROGRAMS).map(|r| (r as f64).powf(-SKEW)).collect();
        let total: f64 = weights.iter().sum();
        let cdf = weights
            .iter()
            .scan(0.0, |acc, w| {
                *acc += w / total;
                Some(*acc)
            })
            .collect::<Vec<f64>>();
        let guide = (0..GUIDE)
            .map(|k| cdf.partition_point(|c| *c < k as f64 / GUIDE as f64) as u32)
            .collect();
        let offsets = (0..PROGRAMS)
            .map(|p| mix(seed ^ (p as u64).wrapping_mul(0x9e37)) % EPISODE_SLOTS as u64)
            .collect();
        ProgramCache {
            seed,
            capacity: capacity.max(1),
            cdf,
            guide,
            offsets,
            run: Mutex::new(Run::new(seed)),
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Whether program `p` is in an awake episode at `slot`: episodes of random length
    /// per program, deterministic from the seed.
    fn awake(&self, run: &mut Run, p: usize) -> bool {
        if p < HEAD {
            return true;
        }
        // Each program's timeline is cut into episodes of EPISODE_SLOTS on average,
        // offset per program so wake-ups are spread out.
        let episode = (run.slot + self.offsets[p]) / EPISODE_SLOTS as u64;
        let (cached, awake) = run.episode[p];
        if cached == episode {
            return awake;
        }
        let draw = mix(self.seed ^ mix((p as u64) << 32 ^ episode));
        let awake = ((draw >> 11) as f64 / (1u64 << 53) as f64) < AWAKE;
        run.episode[p] = (episode, awake);
        awake
    }

    /// The first rank whose cumulative popularity reaches `u`.
    fn rank(&self, u: f64) -> usize {
        let mut p = self.guide[((u * GUIDE as f64) as usize).min(GUIDE - 1)] as usize;
        while p < PROGRAMS && self.cdf[p] < u {
            p += 1;
        }
        p.min(PROGRAMS - 1)
    }

    fn draw(&self, run: &mut Run) -> usize {
        loop {
            let u = run.uniform();
            let p = self.rank(u);
            if self.awake(run, p) {
                return p;
            }
        }
    }

    fn slot(&self, run: &mut Run) -> SlotStats {
        let mut stats = SlotStats::default();
        let keep = (SHRINK_TO * self.capacity as f64) as usize;
        let mut batch: Vec<(usize, u64)> = Vec::with_capacity(DRAWS_PER_BATCH as usize);
        for _ in 0..BATCHES_PER_SLOT {
            batch.clear();
            for _ in 0..DRAWS_PER_BATCH {
                let p = self.draw(run);
                match batch.iter_mut().find(|(q, _)| *q == p) {
                    Some((_, n)) => *n += TXS_PER_DRAW,
                    None => batch.push((p, TXS_PER_DRAW)),
                }
            }
            stats.hits += BUILTINS as i64;
            let mut loaded_missing = false;
            for &(p, txs) in &batch {
                if run.index[p].is_some() {
                    stats.hits += 1;
                    run.usage[p] += txs;
                } else {
                    stats.misses += 1;
                    loaded_missing = true;
                    if run.seen[p] {
                        stats.reloads += 1;
                        run.usage[p] += txs;
                    } else {
                        stats.insertions += 1;
                        run.seen[p] = true;
                        run.usage[p] = txs;
                    }
                    run.index[p] = Some(run.loaded.len() as u32);
                    run.loaded.push(p as u32);
                }
                run.last_access[p] = run.slot;
            }
            if loaded_missing {
                run.evict(keep, &mut stats);
            }
        }
        let jitter = 1.0 + 0.15 * (2.0 * run.uniform() - 1.0);
        let load: f64 = (0..stats.misses)
            .map(|_| LOAD_US * (0.4 + 1.2 * run.uniform()))
            .sum();
        stats.program_cache_us = (BASE_US * jitter + load) as i64;
        run.slot += 1;
        stats
    }

    /// The stats of slot `n` (counted from the first slot replayed). Slots are replayed in
    /// order: asking for an earlier one replays from the start (a restarted lab).
    pub fn stats_of_slot(&self, n: u64) -> SlotStats {
        let mut run = self.run.lock().unwrap_or_else(|e| e.into_inner());
        if n < run.slot {
            *run = Run::new(self.seed);
        }
        while run.slot < n {
            self.slot(&mut run);
        }
        self.slot(&mut run)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Per-slot means over `slots` slots after `warm` slots, by capacity.
    fn means(capacity: usize, warm: u64, slots: u64, seed: u64) -> (f64, f64, f64) {
        let c = ProgramCache::new(seed, capacity);
        let (mut m, mut e, mut t) = (0.0, 0.0, 0.0);
        for n in warm..warm + slots {
            let s = c.stats_of_slot(n);
            m += s.misses as f64;
            e += s.evictions as f64;
            t += s.program_cache_us as f64;
        }
        let k = slots as f64;
        (m / k, e / k, t / k / 1000.0)
    }

    /// Figure 12's shape over two simulated hours after the first: misses and evictions
    /// fall with the size, 2,048 entries evict nothing, and the time follows the misses.
    #[test]
    fn figure_12_emerges_from_the_mechanism() {
        let (m512, e512, t512) = means(512, 9_000, 18_000, 3);
        let (m1024, e1024, t1024) = means(1024, 9_000, 18_000, 3);
        let (m2048, e2048, t2048) = means(2048, 9_000, 18_000, 3);
        assert!((0.6..1.1).contains(&m512), "512 misses {m512}");
        assert!((0.6..1.1).contains(&e512), "512 evictions {e512}");
        assert!((0.03..0.2).contains(&m1024), "1024 misses {m1024}");
        assert!(
            e1024 < 0.2 && m2048 < 0.03 && e2048 == 0.0,
            "{e1024} {m2048} {e2048}"
        );
        assert!((30.0..50.0).contains(&t512), "512 time {t512}");
        assert!(
            t512 > 2.0 * t1024 && t1024 > t2048,
            "{t512} {t1024} {t2048}"
        );
    }

    #[test]
    fn the_guide_table_draws_the_ranks_a_search_would() {
        let c = ProgramCache::new(5, 512);
        let mut run = Run::new(5);
        for _ in 0..200_000 {
            let u = run.uniform();
            let searched = c.cdf.partition_point(|x| *x < u).min(PROGRAMS - 1);
            assert_eq!(c.rank(u), searched, "u = {u}");
        }
        for u in [0.0, 1.0, c.cdf[0], c.cdf[PROGRAMS - 2], 1.0 - f64::EPSILON] {
            assert_eq!(
                c.rank(u),
                c.cdf.partition_point(|x| *x < u).min(PROGRAMS - 1)
            );
        }
    }

    #[test]
    fn a_restarted_run_replays_the_same_slots() {
        let c = ProgramCache::new(9, 512);
        let later = c.stats_of_slot(3_000);
        let earlier = c.stats_of_slot(100);
        assert_eq!(c.stats_of_slot(3_000), later);
        assert_eq!(ProgramCache::new(9, 512).stats_of_slot(100), earlier);
    }

    #[test]
    #[ignore = "prints the calibration; run with --ignored --nocapture"]
    fn calibration() {
        for cap in [512, 1024, 2048] {
            let (m, e, t) = means(cap, 0, 108_000, 7);
            println!("{cap}: misses {m:.3}/slot, evictions {e:.3}/slot, {t:.2} ms/slot");
        }
    }
}
