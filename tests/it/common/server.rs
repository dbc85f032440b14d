//! A scripted OpenAI-compatible server on a loopback port, for the tests of model-driven stages.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

/// What the server saw: one entry per HTTP request (the user message, or a text completion's
/// prompt).
pub type Log = Arc<Mutex<Vec<String>>>;

/// How the script answers a request: the HTTP status (0: the connection is cut, no answer at
/// all), extra header lines (each ending in `\r\n`), and the message's content (with status
/// 200); with any other status, the content is the error body sent (`{"error": "busy"}` when
/// it is empty).
pub type Reply = (u16, &'static str, String);

/// Starts the server; each request is answered after `delay`, one at a time, with
/// `answer(user message, how many requests so far carried this same message)`. Returns the base
/// URL, the log of every request's user message, and the log of those whose answers were sent
/// in full with status 200.
pub fn serve(
    delay: Duration,
    answer: impl Fn(&str, usize) -> Reply + Send + 'static,
) -> (String, Log, Log) {
    serve_on("127.0.0.1", delay, answer)
}

/// Like [`serve`], listening on `address` (an address of this host that other hosts reach).
pub fn serve_on(
    address: &str,
    delay: Duration,
    answer: impl Fn(&str, usize) -> Reply + Send + 'static,
) -> (String, Log, Log) {
    let listener = TcpListener::bind((address, 0)).unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let log: Log = Arc::default();
    let answered: Log = Arc::default();
    let seen = log.clone();
    let done = answered.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::sleep(delay);
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                if line == "\r\n" {
                    break;
                }
            }
            let mut body = vec![0; length];
            if reader.read_exact(&mut body).is_err() {
                continue;
            }
            let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            // A chat completion's user message, or a text completion's prompt.
            let completion = request["prompt"].is_string();
            let prompt = request["messages"][1]["content"]
                .as_str()
                .or(request["prompt"].as_str())
                .unwrap_or_default()
                .to_owned();
            let n_same = {
                let mut log = seen.lock().unwrap();
                log.push(prompt.clone());
                log.iter().filter(|p| **p == prompt).count()
            };
            let (status, extra, content) = answer(&prompt, n_same);
            if status == 0 {
                // A cut connection: no answer at all.
                continue;
            }
            let payload = if status == 200 {
                let choice = if completion {
                    serde_json::json!({"text": content})
                } else {
                    serde_json::json!({"message": {"role": "assistant", "content": content}})
                };
                serde_json::json!({
                    "choices": [choice],
                    "usage": {"prompt_tokens": prompt.len() / 4, "completion_tokens": content.len() / 4},
                })
                .to_string()
            } else if content.is_empty() {
                "{\"error\": \"busy\"}".into()
            } else {
                content
            };
            let sent = write!(
                stream,
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{payload}",
                payload.len()
            )
            .and_then(|_| stream.flush());
            if sent.is_ok() && status == 200 {
                done.lock().unwrap().push(prompt);
            }
        }
    });
    (url, log, answered)
}
