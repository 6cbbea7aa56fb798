//! A process's /proc entries written in the kernel's own formats (proc(5)), into the
//! directory the lab gives a pod for its process namespace, so a real process-exporter
//! (`-procfs DIR`) reads them as it reads a live /proc. What it parses and requires is
//! in prometheus/procfs v0.14.0 (proc_stat.go, proc_status.go, proc_limits.go, stat.go).

use std::path::Path;

use super::clients::ProcFigures;

/// The kernel's page size: `rss` in `/proc/<pid>/stat` is in pages.
const PAGE: u64 = 4096;
/// Clock ticks per second (USER_HZ).
const HZ: u64 = 100;

/// A process namespace's /proc with no process in it yet: `stat` with the boot time.
pub fn namespace(root: &Path, boot: u64) -> std::io::Result<()> {
    std::fs::create_dir_all(root)?;
    std::fs::write(root.join("stat"), format!("btime {boot}\n"))
}

/// The files of one process. `ppid` is its parent (1: the namespace's first process);
/// `boot` the boot time (epoch seconds); `started` the process's start (epoch seconds);
/// `cmdline` its argv.
#[allow(clippy::too_many_arguments)]
pub fn write(
    root: &Path,
    pid: u32,
    ppid: u32,
    boot: u64,
    started: u64,
    cmdline: &[String],
    p: &ProcFigures,
) -> std::io::Result<()> {
    let dir = root.join(pid.to_string());
    std::fs::create_dir_all(dir.join("fd"))?;
    let comm: String = p.comm.chars().take(15).collect();
    let starttime = started.saturating_sub(boot) * HZ;
    // Fields 3..52 of proc(5); unset ones as a sleeping process has them.
    let stat = format!(
        "{pid} ({comm}) S {ppid} {pid} {pid} 0 -1 4194560 {minflt} 0 {majflt} 0 {utime} {stime} 0 0 20 0 {threads} 0 {starttime} {vsize} {rss} 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
        minflt = p.minor_faults,
        majflt = p.major_faults,
        utime = 0,
        stime = 0,
        threads = p.threads,
        vsize = p.vsz_bytes,
        rss = p.rss_bytes / PAGE,
    );
    let kb = |b: u64| b / 1024;
    let status = format!(
        "Name:\t{comm}\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t{pid}\nPid:\t{pid}\nPPid:\t{ppid}\nUid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\nVmSize:\t{} kB\nVmRSS:\t{} kB\nVmSwap:\t{} kB\nThreads:\t{}\nvoluntary_ctxt_switches:\t0\nnonvoluntary_ctxt_switches:\t0\n",
        kb(p.vsz_bytes),
        kb(p.rss_bytes),
        kb(p.swap_bytes),
        p.threads
    );
    let limits = "Limit                     Soft Limit           Hard Limit           Units     \nMax open files            1000000              1000000              files     \n";
    let io = format!(
        "rchar: {r}\nwchar: {w}\nsyscr: 0\nsyscw: 0\nread_bytes: {r}\nwrite_bytes: {w}\ncancelled_write_bytes: 0\n",
        r = p.read_bytes,
        w = p.write_bytes
    );
    let argv: String = cmdline.iter().map(|a| format!("{a}\0")).collect();
    let comm_file = format!("{comm}\n");
    for (name, content) in [
        ("comm", comm_file.as_str()),
        ("stat", stat.as_str()),
        ("status", status.as_str()),
        ("limits", limits),
        ("io", io.as_str()),
        ("cmdline", argv.as_str()),
    ] {
        // Written whole and renamed, so a reader never sees half a file.
        let tmp = dir.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, content)?;
        std::fs::rename(&tmp, dir.join(name))?;
    }
    namespace(root, boot)
}

/// The text of `/proc/<pid>/ns/mnt` (what readlink(2) gives) for a process in the mount
/// namespace of the container whose first process is `first`.
pub fn container_mnt(first: u32) -> String {
    format!("mnt:[{}]", 4_026_532_000u64 + u64::from(first))
}

/// The same for a process that made a mount namespace of its own (a sandbox).
pub fn own_mnt(pid: u32) -> String {
    format!("mnt:[{}]", 4_026_632_000u64 + u64::from(pid))
}

/// `/proc/<pid>/ns/mnt`, a link naming the process's mount namespace (`link`).
pub fn write_mnt(root: &Path, pid: u32, link: &str) -> std::io::Result<()> {
    let ns = root.join(pid.to_string()).join("ns");
    let path = ns.join("mnt");
    if std::fs::read_link(&path).is_ok_and(|l| l.as_os_str() == link) {
        return Ok(());
    }
    std::fs::create_dir_all(&ns)?;
    let _ = std::fs::remove_file(&path);
    std::os::unix::fs::symlink(link, path)
}

/// More files of a process (e.g. `smaps_rollup`), as its model writes them.
pub fn write_files(root: &Path, pid: u32, files: &[(String, String)]) -> std::io::Result<()> {
    let dir = root.join(pid.to_string());
    for (name, content) in files {
        let tmp = dir.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, content)?;
        std::fs::rename(&tmp, dir.join(name))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_has_the_kernels_52_fields() {
        let root = std::env::temp_dir().join(format!("valtune-procfs-{}", std::process::id()));
        let p = ProcFigures {
            comm: "agave-validator".into(),
            rss_bytes: 512 << 30,
            vsz_bytes: 1 << 40,
            swap_bytes: 0,
            minor_faults: 7,
            major_faults: 3,
            read_bytes: 0,
            write_bytes: 0,
            threads: 600,
        };
        write(
            &root,
            4242,
            4241,
            1_700_000_000,
            1_700_000_100,
            &["agave-validator".into()],
            &p,
        )
        .unwrap();
        let stat = std::fs::read_to_string(root.join("4242/stat")).unwrap();
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        assert_eq!(after.split_whitespace().count(), 50, "fields 3..52");
        let fields: Vec<&str> = after.split_whitespace().collect();
        assert_eq!(fields[1], "4241", "ppid");
        assert_eq!(fields[7], "7", "minflt");
        assert_eq!(fields[9], "3", "majflt");
        assert_eq!(fields[19], "10000", "starttime in ticks");
        assert_eq!(
            fields[21],
            ((512u64 << 30) / 4096).to_string(),
            "rss in pages"
        );
        let status = std::fs::read_to_string(root.join("4242/status")).unwrap();
        assert!(status.contains("Uid:\t1000\t1000\t1000\t1000\n"));
        assert!(status.contains("PPid:\t4241\n"));
        assert_eq!(
            std::fs::read_to_string(root.join("stat")).unwrap(),
            "btime 1700000000\n"
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
