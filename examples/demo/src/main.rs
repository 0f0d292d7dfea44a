//! `train`: a stand-in for a flodl training binary.
//!
//! Prints what a cluster launcher must get right (variant, features, host,
//! cwd, LD_LIBRARY_PATH, args), one `key=value` per line, then a few fake
//! training steps. Knobs (all optional):
//!
//! * `FLODL_DEMO_STEP_MS`  - sleep per step in ms (default 100)
//! * `FLODL_DEMO_STEPS`    - number of steps (default 3)
//! * `FLODL_DEMO_SLEEP_S`  - sleep this many seconds before exiting (a long-running rank)
//! * `FLODL_DEMO_FAIL_HOST=<host>:<code>[,<host>:<code>...]` - exit with `code` on `host`
//!
//! With `FLODL_INTERNAL_AGENT_JSON` set it is a walk-in agent first (agent.rs): it dials the
//! stand-in's join window, runs the ranks it is given and reports their exit codes.
mod agent;

use std::env;
use std::fs;
use std::io::Write;
use std::thread::sleep;
use std::time::Duration;

const VARIANT: &str = env!("FLODL_DEMO_VARIANT");

fn features() -> &'static str {
    if cfg!(feature = "cuda") {
        "cuda"
    } else if cfg!(feature = "rocm") {
        "rocm"
    } else {
        "cpu"
    }
}

fn host_name() -> String {
    if let Ok(h) = env::var("FLODL_HOST_NAME") {
        if !h.trim().is_empty() {
            return h.trim().to_string();
        }
    }
    fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown-host".to_string())
}

fn env_num(name: &str, default: u64) -> u64 {
    env::var(name).ok().and_then(|v| v.trim().parse().ok()).unwrap_or(default)
}

/// The exit code `FLODL_DEMO_FAIL_HOST` assigns to `host`, if any.
fn fail_code(host: &str) -> Option<i32> {
    let spec = env::var("FLODL_DEMO_FAIL_HOST").ok()?;
    spec.split(',').find_map(|item| {
        let (h, code) = item.trim().rsplit_once(':')?;
        if h == host {
            code.trim().parse().ok()
        } else {
            None
        }
    })
}

fn main() {
    if let Some(code) = agent::run_if_agent(&host_name()) {
        std::process::exit(code);
    }
    let host = host_name();
    let cwd = env::current_dir()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let args: Vec<String> = env::args().skip(1).collect();
    let out = std::io::stdout();
    let mut out = out.lock();
    let _ = writeln!(out, "variant={}", VARIANT);
    let _ = writeln!(out, "features={}", features());
    let _ = writeln!(out, "host={}", host);
    let _ = writeln!(out, "cwd={}", cwd);
    let _ = writeln!(out, "ld_library_path={}", env::var("LD_LIBRARY_PATH").unwrap_or_default());
    let _ = writeln!(out, "args={}", args.join(" "));
    let _ = out.flush();

    let step_ms = env_num("FLODL_DEMO_STEP_MS", 100);
    let steps = env_num("FLODL_DEMO_STEPS", 3);
    let mut loss = 2.5_f64;
    for step in 1..=steps {
        sleep(Duration::from_millis(step_ms));
        loss *= 0.6;
        let _ = writeln!(out, "step {} loss {:.4}", step, loss);
        let _ = out.flush();
    }

    if let Ok(secs) = env::var("FLODL_DEMO_SLEEP_S") {
        if let Ok(secs) = secs.trim().parse::<f64>() {
            if secs > 0.0 {
                let _ = writeln!(out, "sleeping {}s", secs);
                let _ = out.flush();
                sleep(Duration::from_secs_f64(secs));
            }
        }
    }

    if let Some(code) = fail_code(&host) {
        let _ = writeln!(out, "failing on purpose: host={} code={}", host, code);
        let _ = out.flush();
        std::process::exit(code);
    }
    let _ = writeln!(out, "done");
}
