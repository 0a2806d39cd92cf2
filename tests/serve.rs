//! `glmw serve` driven by the official `openai` Python client
//! (tests/serve/openai_client.py): chat plain and streamed, completions,
//! two requests at once, a cancelled stream, malformed requests answered
//! with 4xx while the server goes on serving. The server runs the
//! built-in model on 127.0.0.1 at a port it picks; it is killed at the end
//! whatever happens.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Kills the server when the test ends, passing or not.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start the server and return it with its base URL, read from the line
/// it prints once listening.
fn start() -> (Server, String) {
    common::gpu(); // fails with the lavapipe hint when there is no adapter
    let child = Command::new(env!("CARGO_BIN_EXE_glmw"))
        .args(["serve", "--port", "0", "--parallel", "2", "-c", "512"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start glmw serve");
    let mut server = Server(child);
    let stderr = server.0.stderr.take().expect("piped stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut memory = false;
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("[server] {line}");
            // The memory report comes before the server listens.
            memory |= line.starts_with("memory: GPU ");
            if let Some(url) = line.split("listening on ").nth(1) {
                let url = url.split_whitespace().next().unwrap_or("").to_string();
                let _ = tx.send((url, memory));
            }
        }
    });
    let (url, memory) = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("glmw serve did not start listening within 120 s");
    assert!(memory, "glmw serve printed no memory line before listening");
    (server, url)
}

#[test]
fn the_openai_client_is_served() {
    let has_openai = Command::new("python3")
        .args(["-c", "import openai"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        has_openai,
        "this test needs python3 with the openai package: python3 -m pip install openai"
    );
    let (_server, url) = start();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/serve/openai_client.py");
    let mut client = Command::new("python3")
        .args([script, &url])
        .spawn()
        .expect("run python3");
    // Bounded: the client's own waits are bounded too; this catches a hang.
    for _ in 0..600 {
        if let Some(status) = client.try_wait().expect("wait for the client") {
            assert!(status.success(), "the openai client's checks failed");
            return;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let _ = client.kill();
    panic!("the openai client did not finish within 300 s");
}
