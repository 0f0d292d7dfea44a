//! The demo's walk-in agent: what flodl's training binary does when `FLODL_INTERNAL_AGENT_JSON` is set.
//!
//! It decodes the spec (hex JSON), dials `controller_host:controller_port`, presents its host name and
//! the spec as it got it, and waits for its ranks and the start. Each rank is this same program run
//! again without the spec (the plain rank of main.rs); its lines are printed on this agent's stdout
//! prefixed `[host:device:rRANK] `, and its exit code is reported to the window. A rank that fails
//! makes the agent say `finished DEGRADED` and still exit 0: the verdict is the launcher's.
//! The window closing early (the launcher stopped) stops the ranks and ends the agent.
//!
//! When nothing listens at the controller's port, the program is a rank started directly (the
//! stand-in's ssh fan-out starts each host's binary itself and opens no window).
use std::env;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

const SPEC: &str = "FLODL_INTERNAL_AGENT_JSON";

/// The agent's exit code, or None: not an agent (no spec, or no window to dial).
pub fn run_if_agent(host: &str) -> Option<i32> {
    let hex = env::var(SPEC).ok()?;
    let json = match decode_hex(hex.trim()) {
        Some(text) => text,
        None => {
            eprintln!("agent: {SPEC} is not hex");
            return Some(2);
        }
    };
    let (chost, cport) = match (string_field(&json, "controller_host"), number_field(&json, "controller_port")) {
        (Some(h), Some(p)) => (h, p),
        _ => {
            eprintln!("agent: the spec lacks controller_host or controller_port");
            return Some(2);
        }
    };
    let addr = (chost.as_str(), cport as u16).to_socket_addrs().ok()?.next()?;
    let stream = match TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => return None,
        Err(e) => {
            println!("agent: could not dial the controller at {chost}:{cport}: {e}");
            return Some(1);
        }
    };
    Some(agent(host, hex.trim(), stream))
}

fn agent(host: &str, hex: &str, stream: TcpStream) -> i32 {
    let mut out = stream.try_clone().expect("socket clone");
    let mut lines = BufReader::new(stream).lines();
    let _ = write!(out, "name {host}\nhello {hex}\n");
    let answer = lines.next().and_then(|l| l.ok()).unwrap_or_default();
    let ranks: Vec<u32> = match answer.strip_prefix("ranks ") {
        Some(list) => list.split(',').filter_map(|r| r.trim().parse().ok()).collect(),
        None => {
            println!("agent: the join window refused {host}: {}", answer.trim_start_matches("refused "));
            return 1;
        }
    };
    println!("agent: {host} joined with ranks {ranks:?}");
    if lines.next().and_then(|l| l.ok()).as_deref() != Some("start") {
        println!("agent: the window closed before the start");
        return 1;
    }
    let pids: Arc<Mutex<Vec<u32>>> = Arc::new(Mutex::new(Vec::new()));
    let finished = Arc::new(AtomicBool::new(false));
    // The window closing early (the launcher stopped, or killed) stops every rank at once.
    let (watched, done) = (Arc::clone(&pids), Arc::clone(&finished));
    thread::spawn(move || {
        for _ in lines.by_ref() {}
        if done.load(Ordering::SeqCst) {
            return;
        }
        for pid in watched.lock().unwrap().iter() {
            let _ = Command::new("kill").arg("-KILL").arg(pid.to_string()).status();
        }
        println!("agent: the controller went away; ranks stopped");
        std::process::exit(1);
    });
    let mut children: Vec<Child> = Vec::new();
    let me = env::current_exe().expect("current exe");
    let mut forwarders = Vec::new();
    for (i, rank) in ranks.iter().enumerate() {
        let mut child = Command::new(&me)
            .args(env::args().skip(1))
            .env_remove(SPEC)
            .env("FLODL_DEMO_RANK", rank.to_string())
            .stdout(Stdio::piped())
            .spawn()
            .expect("rank start");
        let stdout = child.stdout.take().expect("rank stdout");
        let prefix = format!("[{host}:{i}:r{rank}] ");
        forwarders.push(thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                println!("{prefix}{line}");
            }
        }));
        pids.lock().unwrap().push(child.id());
        children.push(child);
    }
    for f in forwarders {
        let _ = f.join();
    }
    let mut degraded = false;
    for (child, rank) in children.iter_mut().zip(&ranks) {
        let code = child.wait().map(|s| s.code().unwrap_or(137)).unwrap_or(1);
        degraded |= code != 0;
        let _ = writeln!(out, "exit {rank} {code}");
    }
    finished.store(true, Ordering::SeqCst);
    let _ = writeln!(out, "done");
    println!("agent: {host} finished{}", if degraded { " DEGRADED" } else { "" });
    0
}

fn decode_hex(text: &str) -> Option<String> {
    if text.len() % 2 != 0 {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

/// A top-level string field of flat JSON, enough for the two the agent reads itself.
fn string_field(json: &str, key: &str) -> Option<String> {
    let at = json.find(&format!("\"{key}\":"))? + key.len() + 3;
    let rest = json[at..].trim_start().strip_prefix('"')?;
    Some(rest[..rest.find('"')?].to_string())
}

fn number_field(json: &str, key: &str) -> Option<u64> {
    let at = json.find(&format!("\"{key}\":"))? + key.len() + 3;
    let rest = json[at..].trim_start();
    let end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
    rest[..end].parse().ok()
}
