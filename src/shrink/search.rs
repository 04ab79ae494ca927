//! The search: the schedule without any fault, then delta debugging over the fault list, then
//! each kept fault's length halved, then the run cut short; each candidate tried up to K times
//! and kept if the violation kind recurs.

use super::*;

impl Shrinker {
    /// Runs every phase; the reason it stopped early, if it did.
    pub(super) async fn search(&mut self) -> Option<&'static str> {
        if let Err(why) = self.drop_faults().await {
            return Some(why);
        }
        if let Err(why) = self.shorten_faults().await {
            return Some(why);
        }
        self.cut_duration().await.err()
    }

    /// Delta debugging over the fault list, after trying none at all.
    async fn drop_faults(&mut self) -> Result<(), &'static str> {
        if self.best.schedule.faults.is_empty() {
            return Ok(());
        }
        if self.try_faults(Vec::new()).await? {
            return Ok(());
        }
        let mut n = 2;
        // Bounded: every pass either shrinks the list or raises n toward its length.
        while self.best.schedule.faults.len() >= 2 {
            let current = self.best.schedule.faults.clone();
            let chunks = split(&current, n);
            let mut reduced = false;
            for chunk in &chunks {
                if self.try_faults(chunk.clone()).await? {
                    n = 2;
                    reduced = true;
                    break;
                }
            }
            if !reduced && n > 2 {
                for i in 0..chunks.len() {
                    let rest: Vec<PlannedFault> = chunks
                        .iter()
                        .enumerate()
                        .filter(|(j, _)| *j != i)
                        .flat_map(|(_, c)| c.iter().cloned())
                        .collect();
                    if self.try_faults(rest).await? {
                        n = (n - 1).max(2);
                        reduced = true;
                        break;
                    }
                }
            }
            if !reduced {
                if n >= current.len() {
                    break;
                }
                n = (n * 2).min(current.len());
            }
        }
        Ok(())
    }

    /// Halves each kept fault's length while the kind still recurs.
    async fn shorten_faults(&mut self) -> Result<(), &'static str> {
        for i in 0..self.best.schedule.faults.len() {
            loop {
                let mut s = self.best.schedule.clone();
                let f = &mut s.faults[i];
                let (was, half) = (f.length_ms, f.length_ms / 2);
                if half < LENGTH_MIN_MS {
                    break;
                }
                f.length_ms = half;
                let what = format!("{} {was} ms -> {half} ms", f.id);
                let d = self.duration_for(&s).min(self.best.duration_ms);
                if !self.try_candidate(s, d, &what).await? {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Cuts the run to just after the last fault plus the quiet period (without faults:
    /// halves it while the kind recurs, down to 2 s).
    async fn cut_duration(&mut self) -> Result<(), &'static str> {
        loop {
            let s = self.best.schedule.clone();
            let current = self.best.duration_ms;
            let cut = if s.faults.is_empty() {
                (current / 2).max(DURATION_MIN_MS)
            } else {
                self.duration_for(&s)
            };
            if cut >= current {
                return Ok(());
            }
            let what = format!("run {current} ms -> {cut} ms");
            if !self.try_candidate(s.clone(), cut, &what).await? || !s.faults.is_empty() {
                return Ok(());
            }
        }
    }

    /// The run length that covers a schedule: its last fault's end (a stall may start up to
    /// its window late; a killed service needs 2 leases to recover), then a quiet period of
    /// 3 leases for the violation to show.
    fn duration_for(&self, s: &Schedule) -> u64 {
        let lease = self.lease_max_ms;
        let end = s
            .faults
            .iter()
            .map(|f| f.end_ms() + f.window_ms().unwrap_or(0) + f.kind().recovery_leases() * lease)
            .max()
            .unwrap_or(0);
        (end + 3 * lease).max(DURATION_MIN_MS)
    }

    /// A candidate keeping only `faults`; Ok(true) if it still fails (it is then the best).
    async fn try_faults(&mut self, faults: Vec<PlannedFault>) -> Result<bool, &'static str> {
        let ids: Vec<String> = faults.iter().map(|f| f.id.clone()).collect();
        if self.failed.contains(&ids) {
            return Ok(false);
        }
        let mut s = self.best.schedule.clone();
        s.faults = faults;
        let d = if s.faults.is_empty() {
            self.best.duration_ms
        } else {
            self.duration_for(&s).min(self.best.duration_ms)
        };
        let kept = self.try_candidate(s, d, "").await?;
        if !kept {
            self.failed.insert(ids);
        }
        Ok(kept)
    }

    async fn try_candidate(
        &mut self,
        s: Schedule,
        duration_ms: u64,
        what: &str,
    ) -> Result<bool, &'static str> {
        match self.test(&s, duration_ms, what).await {
            Verdict::Reproduced(run_dir, try_no) => {
                self.kept += 1;
                self.best = Best {
                    schedule: s,
                    duration_ms,
                    run_dir,
                    try_no,
                };
                Ok(true)
            }
            Verdict::NotReproduced => Ok(false),
            Verdict::Stopped(why) => Err(why),
        }
    }

    /// Runs a candidate up to K times; one line of progress.
    async fn test(&mut self, s: &Schedule, duration_ms: u64, what: &str) -> Verdict {
        self.candidates += 1;
        let name = format!("c{}", self.candidates);
        let file = self.dir.join("candidates").join(format!("{name}.json"));
        if let Err(e) = std::fs::write(&file, s.to_json()) {
            eprintln!("lockpick: cannot write {}: {e}", file.display());
            return Verdict::Stopped("cannot write candidates");
        }
        let ids: Vec<&str> = s.faults.iter().map(|f| f.id.as_str()).collect();
        let line = format!(
            "{name}: {} fault(s) [{}]{}{}, {:.1} s run: ",
            ids.len(),
            ids.join(" "),
            if what.is_empty() { "" } else { ", " },
            what,
            duration_ms as f64 / 1000.0
        );
        let mut seen = Vec::new();
        for t in 1..=self.tries {
            let needed = Duration::from_millis(duration_ms) + self.overhead;
            if self.interrupted.load(Ordering::SeqCst) {
                self.say(&line, "not run (interrupted)");
                return Verdict::Stopped("interrupted");
            }
            if self.started.elapsed() + needed > self.budget {
                // What the runs before showed, if it ran: "not run" alone read as if none did.
                let result = match seen.len() {
                    0 => "not run: the budget would be spent before it ends".to_string(),
                    n => format!(
                        "not reproduced in {n} run(s) ({}); run {t} of up to {} not run: the \
                         budget would be spent before it ends",
                        seen.join("; "),
                        self.tries
                    ),
                };
                self.say(&line, &result);
                return Verdict::Stopped("budget spent");
            }
            if t == 1 {
                self.ran += 1;
            }
            let (found, run_dir) = self.run_once(&name, &file, duration_ms, t).await;
            if self.interrupted.load(Ordering::SeqCst) {
                self.say(&line, "interrupted");
                return Verdict::Stopped("interrupted");
            }
            if let (true, Some(dir)) = (found.contains(&self.kind), run_dir) {
                // Each candidate stops at its first failing run: "run 1 of up to 2".
                let result = format!("{} in run {t} of up to {} -> kept", self.kind, self.tries);
                self.say(&line, &result);
                return Verdict::Reproduced(dir, t);
            }
            seen.push(if found.is_empty() {
                "no violation".to_string()
            } else {
                found.join("+")
            });
        }
        let result = format!(
            "not reproduced in {} run(s) ({})",
            self.tries,
            seen.join("; ")
        );
        self.say(&line, &result);
        Verdict::NotReproduced
    }

    /// One line of progress, stamped with the time since the shrink began.
    fn say(&self, line: &str, result: &str) {
        let t = self.started.elapsed().as_secs();
        println!("[{:>3}:{:02}] {line}{result}", t / 60, t % 60);
    }
}

/// `n` contiguous chunks of nearly equal size (the first ones one longer).
fn split<T: Clone>(items: &[T], n: usize) -> Vec<Vec<T>> {
    let n = n.clamp(1, items.len().max(1));
    let (q, r) = (items.len() / n, items.len() % n);
    let mut out = Vec::with_capacity(n);
    let mut at = 0;
    for i in 0..n {
        let len = q + usize::from(i < r);
        out.push(items[at..at + len].to_vec());
        at += len;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_list_in_order() {
        let v: Vec<u32> = (1..=7).collect();
        assert_eq!(split(&v, 2), vec![vec![1, 2, 3, 4], vec![5, 6, 7]]);
        assert_eq!(split(&v, 3), vec![vec![1, 2, 3], vec![4, 5], vec![6, 7]]);
        assert_eq!(split(&v, 7).len(), 7);
        assert_eq!(split(&v, 9).len(), 7);
        assert_eq!(split(&[1], 2), vec![vec![1]]);
    }
}
