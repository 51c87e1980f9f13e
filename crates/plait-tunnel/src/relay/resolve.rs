//! Name resolution for the server's relay: SOCKS5 clients may name a destination by
//! domain, and `getaddrinfo` blocks, so lookups run on a few worker threads and their
//! results come back through a channel, the loop woken by a `mio::Waker`.
//!
//! Invariants: at most [`QUEUE`] lookups wait (beyond, `resolve` refuses at once, so a
//! client opening streams to endless names costs bounded memory); workers end when the
//! [`Resolver`] is dropped (after the lookup each is in, if any).

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

use mio::{Registry, Token, Waker};
use plait_proto::StreamId;

use crate::endpoint::StreamPeer;

/// Lookups waiting at most.
const QUEUE: usize = 1024;
/// Worker threads.
const WORKERS: usize = 4;

#[derive(Debug)]
struct Job {
    peer: StreamPeer,
    id: StreamId,
    name: String,
    port: u16,
}

/// A finished lookup.
#[derive(Debug)]
pub struct Resolved {
    /// The stream that asked.
    pub peer: StreamPeer,
    /// See `peer`.
    pub id: StreamId,
    /// The name.
    pub name: String,
    /// The port to connect to.
    pub port: u16,
    /// The addresses (never empty), or why there are none.
    pub result: Result<Vec<SocketAddr>, String>,
}

/// The lookup workers.
#[derive(Debug)]
pub struct Resolver {
    jobs: SyncSender<Job>,
    done: Receiver<Resolved>,
}

impl Resolver {
    /// Starts the workers; they wake the loop through `token`.
    pub fn start(registry: &Registry, token: Token) -> std::io::Result<Resolver> {
        let waker = Arc::new(Waker::new(registry, token)?);
        let (jobs, job_rx) = mpsc::sync_channel::<Job>(QUEUE);
        let job_rx = Arc::new(Mutex::new(job_rx));
        let (done_tx, done) = mpsc::channel();
        for i in 0..WORKERS {
            let rx = Arc::clone(&job_rx);
            let tx: Sender<Resolved> = done_tx.clone();
            let waker = Arc::clone(&waker);
            std::thread::Builder::new()
                .name(format!("plait-resolve-{i}"))
                .spawn(move || work(&rx, &tx, &waker))?;
        }
        Ok(Resolver { jobs, done })
    }

    /// Queues a lookup of `name` for stream `id`; `Err` if too many wait.
    pub fn resolve(
        &mut self,
        peer: StreamPeer,
        id: StreamId,
        name: &str,
        port: u16,
    ) -> Result<(), &'static str> {
        let job = Job {
            peer,
            id,
            name: name.to_owned(),
            port,
        };
        match self.jobs.try_send(job) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_)) => Err("too many name lookups waiting"),
            Err(TrySendError::Disconnected(_)) => Err("the resolver stopped"),
        }
    }

    /// Lookups finished since the last call.
    pub fn take_done(&mut self) -> Vec<Resolved> {
        self.done.try_iter().collect()
    }
}

fn work(jobs: &Mutex<Receiver<Job>>, done: &Sender<Resolved>, waker: &Waker) {
    loop {
        let job = {
            let Ok(rx) = jobs.lock() else { return };
            match rx.recv() {
                Ok(j) => j,
                Err(_) => return,
            }
        };
        let result = match (job.name.as_str(), job.port).to_socket_addrs() {
            Ok(addrs) => {
                let addrs: Vec<SocketAddr> = addrs.collect();
                if addrs.is_empty() {
                    Err("no addresses".to_owned())
                } else {
                    Ok(addrs)
                }
            }
            Err(e) => Err(e.to_string()),
        };
        let r = Resolved {
            peer: job.peer,
            id: job.id,
            name: job.name,
            port: job.port,
            result,
        };
        if done.send(r).is_err() {
            return;
        }
        let _ = waker.wake();
    }
}
