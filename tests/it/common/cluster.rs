//! Hosts on this machine, for tests: `h1`, `h2` and `h3`, each in its own network namespace with
//! its own address on a bridge ([`Network`]); and on them a real Slurm cluster ([`Cluster`]):
//! `h1` the controller, `h2` and `h3` the compute nodes, Debian's Slurm (`slurmctld`, `slurmd`)
//! with one `munged` of its own.
//!
//! The bridge lives in a namespace of its own (Docker's firewall on the root namespace drops
//! bridged traffic there); this process reaches the hosts through a veth `r2e-brX` holding
//! `10.77.X.1`, the hosts are `10.77.X.11` to `.13`. `X` is taken per network (the first free
//! namespace name `r2e-X-net`), so that test processes do not collide. A host's service runs in
//! its network namespace and, started with [`Network::host_shell`], in a UTS namespace of its
//! own with the host's name (and a mount namespace where it has folders of its own). Dropping
//! the network (or the cluster) kills every process in the hosts' namespaces and deletes them.
//!
//! Use: `let Some(c) = Cluster::start() else { return };` (a skip, or under
//! `R2E_TEST_STRICT=1` a failure, where this machine cannot run one), then `c.sbatch(...)`,
//! `c.wait_done(...)`, `c.job_field(...)`, `c.command_in("h1", ...)` for a service on a host.
//! Without Slurm: `let Some(net) = Network::start("a Ray cluster") else { return };`. A
//! `Cluster` derefs to its `Network`.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The hosts: the controller, then the compute nodes.
pub const HOSTS: [&str; 3] = ["h1", "h2", "h3"];
/// The compute nodes (partition `main`).
pub const NODES: [&str; 2] = ["h2", "h3"];

/// The hosts `h1` to `h3` in their network namespaces on a bridge; dropped, every process in
/// them is killed and the namespaces are deleted.
pub struct Network {
    /// The third byte of the hosts' addresses, `10.77.X.0/24`.
    pub subnet: u8,
    /// The services started on the hosts ([`Network::spawn`]).
    daemons: Mutex<Vec<(String, Child)>>,
}

/// A running cluster; dropped, it is torn down.
pub struct Cluster {
    /// The hosts.
    pub net: Network,
    /// Configuration, munge key and socket, state, spool and logs.
    pub dir: tempfile::TempDir,
    /// `slurm.conf`.
    pub conf: PathBuf,
    munged: Option<Child>,
}

impl std::ops::Deref for Cluster {
    type Target = Network;
    fn deref(&self) -> &Network {
        &self.net
    }
}

/// Why this machine cannot run a cluster, if it cannot: not root, no `ip netns`, or a program
/// missing.
pub fn unavailable() -> Option<String> {
    network_unavailable().or_else(|| {
        missing(&[
            "munged",
            "slurmctld",
            "slurmd",
            "sbatch",
            "squeue",
            "scontrol",
            "sinfo",
        ])
    })
}

/// Why this machine cannot run the hosts' [`Network`], if it cannot: not root, no `ip netns`,
/// or `ip`, `nsenter` or `unshare` missing.
pub fn network_unavailable() -> Option<String> {
    if !super::is_root() {
        return Some("not root (network namespaces need it)".into());
    }
    if let Some(why) = missing(&["ip", "nsenter", "unshare"]) {
        return Some(why);
    }
    let ok = Command::new("ip")
        .args(["netns", "list"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    (!ok).then(|| "`ip netns` does not work here".into())
}

/// The first of `programs` found neither on the `PATH` nor in `/usr/sbin`, said.
fn missing(programs: &[&str]) -> Option<String> {
    programs
        .iter()
        .find(|p| {
            r2e_core::fsutil::find_program(p).is_none() && !Path::new("/usr/sbin").join(p).exists()
        })
        .map(|p| format!("`{p}` is missing"))
}

/// Runs `cmd`, which must succeed; its stdout.
pub fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn sbin(program: &str) -> PathBuf {
    r2e_core::fsutil::find_program(program).unwrap_or_else(|| Path::new("/usr/sbin").join(program))
}

impl Network {
    /// Makes the hosts' namespaces and the bridge; `None` when this machine cannot (said on
    /// stderr; a failure under `R2E_TEST_STRICT=1`). `needs` names what the caller runs on the
    /// hosts, for that message.
    pub fn start(needs: &str) -> Option<Network> {
        let why = network_unavailable();
        if !super::require(
            why.is_none(),
            &format!(
                "hosts in network namespaces for {needs}: {}",
                why.as_deref().unwrap_or("")
            ),
            "run as root with iproute2 and util-linux",
        ) {
            return None;
        }
        Some(Network::create())
    }

    /// The namespaces and the bridge, with a free `X`.
    fn create() -> Network {
        let start = (std::process::id() % 200) as u8 + 20;
        let subnet = (0..200u16)
            .map(|i| ((start as u16 + i) % 200 + 20) as u8)
            .find(|x| {
                // Taking the name is the lock: `ip netns add` fails when it exists.
                Command::new("ip")
                    .args(["netns", "add", &format!("r2e-{x}-net")])
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success())
            })
            .expect("a free r2e-X-net namespace name");
        let network = Network {
            subnet,
            daemons: Mutex::new(Vec::new()),
        };
        let net = network.net_ns();
        let ip = |args: &str| {
            run(Command::new("ip").args(args.split_whitespace()));
        };
        ip(&format!("-n {net} link add br0 type bridge"));
        ip(&format!("-n {net} link set br0 up"));
        ip(&format!("-n {net} link set lo up"));
        let up = format!("r2e-br{subnet}");
        ip(&format!(
            "link add {up} type veth peer name up0 netns {net}"
        ));
        ip(&format!("-n {net} link set up0 master br0 up"));
        ip(&format!("addr add 10.77.{subnet}.1/24 dev {up}"));
        ip(&format!("link set {up} up"));
        for (i, host) in HOSTS.iter().enumerate() {
            let ns = network.ns(host);
            ip(&format!("netns add {ns}"));
            ip(&format!(
                "-n {net} link add v{i} type veth peer name eth0 netns {ns}"
            ));
            ip(&format!("-n {net} link set v{i} master br0 up"));
            ip(&format!(
                "-n {ns} addr add {}/24 dev eth0",
                network.addr(host)
            ));
            ip(&format!("-n {ns} link set eth0 up"));
            ip(&format!("-n {ns} link set lo up"));
        }
        network
    }

    /// The namespace holding the bridge.
    fn net_ns(&self) -> String {
        format!("r2e-{}-net", self.subnet)
    }

    /// The network namespace of `host` (`r2e-X-h2`).
    pub fn ns(&self, host: &str) -> String {
        format!("r2e-{}-{host}", self.subnet)
    }

    /// The address of `host` (`h1`: `10.77.X.11`).
    pub fn addr(&self, host: &str) -> Ipv4Addr {
        let n: u8 = host
            .strip_prefix('h')
            .and_then(|n| n.parse().ok())
            .expect("a host h1, h2 or h3");
        Ipv4Addr::new(10, 77, self.subnet, 10 + n)
    }

    /// This machine's address on the bridge, `10.77.X.1`.
    pub fn gateway(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 77, self.subnet, 1)
    }

    /// A command that runs `program` in `host`'s network namespace (this machine's files,
    /// processes and mounts otherwise): a service there listens on the host's address.
    pub fn command_in(&self, host: &str, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.arg(format!("--net=/run/netns/{}", self.ns(host)))
            .arg("--")
            .arg(program);
        cmd
    }

    /// A command that runs the shell `script` on `host` as on a machine of its own: in its
    /// network namespace, in a UTS namespace named after the host, and, when `own` names any,
    /// in a mount namespace where each `(folder, at)` binds the host's own `folder` over `at`
    /// (paths without `'`).
    pub fn host_shell(&self, host: &str, own: &[(&Path, &Path)], script: &str) -> Command {
        let mut setup = format!("hostname {host}");
        for (folder, at) in own {
            setup.push_str(&format!(
                " && mount --bind '{}' '{}'",
                folder.display(),
                at.display()
            ));
        }
        let mut cmd = self.command_in(host, "unshare");
        cmd.arg("--uts");
        if !own.is_empty() {
            cmd.args(["--mount", "--propagation", "private"]);
        }
        cmd.args(["sh", "-c"]).arg(format!("{setup} && {script}"));
        cmd
    }

    /// Starts `cmd` (from [`Network::command_in`] or [`Network::host_shell`]) as a service,
    /// killed with the hosts.
    pub fn spawn(&self, name: &str, cmd: &mut Command) -> u32 {
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        let pid = child.id();
        self.daemons.lock().unwrap().push((name.to_owned(), child));
        pid
    }

    /// Kills every process in `host`'s namespace at once (`SIGKILL`): its services and what
    /// they started, as when the machine dies.
    pub fn kill_host(&self, host: &str) {
        let pids = Command::new("ip")
            .args(["netns", "pids", &self.ns(host)])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        for pid in pids
            .split_whitespace()
            .filter_map(|p| p.parse::<i32>().ok())
        {
            // SAFETY: kill takes plain integers.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        // Reap the children of ours that died.
        let mut daemons = self.daemons.lock().unwrap();
        for (_, child) in daemons.iter_mut() {
            let _ = child.try_wait();
        }
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        for host in HOSTS {
            self.kill_host(host);
        }
        for (_, mut child) in self.daemons.lock().unwrap().drain(..) {
            let _ = child.kill();
            let _ = child.wait();
        }
        // Deleting a namespace deletes its veths, and their peers with them.
        for ns in HOSTS.iter().map(|h| self.ns(h)).chain([self.net_ns()]) {
            let _ = Command::new("ip")
                .args(["netns", "del", &ns])
                .stderr(Stdio::null())
                .status();
        }
        let _ = Command::new("ip")
            .args(["link", "del", &format!("r2e-br{}", self.subnet)])
            .stderr(Stdio::null())
            .status();
    }
}

impl Cluster {
    /// Starts a cluster and waits until both nodes are idle; `None` when this machine cannot
    /// run one (said on stderr; a failure under `R2E_TEST_STRICT=1`).
    pub fn start() -> Option<Cluster> {
        let why = unavailable();
        if !super::require(
            why.is_none(),
            &format!("a Slurm cluster: {}", why.as_deref().unwrap_or("")),
            "run as root with iproute2, `apt-get install slurm-wlm munge`",
        ) {
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix("r2e-slurm-")
            .tempdir()
            .unwrap();
        let mut cluster = Cluster {
            net: Network::create(),
            conf: dir.path().join("slurm.conf"),
            dir,
            munged: None,
        };
        cluster.start_munge();
        cluster.write_conf();
        cluster.spawn_daemon("h1");
        for node in NODES {
            cluster.spawn_daemon(node);
        }
        cluster.wait_nodes(&NODES, &["idle"], Duration::from_secs(60));
        Some(cluster)
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn start_munge(&mut self) {
        let munge = self.path("munge");
        std::fs::create_dir_all(&munge).unwrap();
        let mut key = vec![0u8; 1024];
        use std::io::Read;
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut key))
            .unwrap();
        std::fs::write(munge.join("key"), key).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(munge.join("key"), std::fs::Permissions::from_mode(0o600))
            .unwrap();
        std::fs::set_permissions(&munge, std::fs::Permissions::from_mode(0o700)).unwrap();
        let child = Command::new(sbin("munged"))
            .arg("--foreground")
            .arg("--force")
            .arg(format!("--socket={}", munge.join("sock").display()))
            .arg(format!("--key-file={}", munge.join("key").display()))
            .arg(format!("--pid-file={}", munge.join("pid").display()))
            .arg(format!("--log-file={}", munge.join("log").display()))
            .arg(format!("--seed-file={}", munge.join("seed").display()))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(munge.join("stderr")).unwrap())
            .spawn()
            .expect("munged starts");
        self.munged = Some(child);
        wait_for(Duration::from_secs(10), "munged's socket", || {
            munge.join("sock").exists()
        });
    }

    fn write_conf(&self) {
        let d = self.dir.path().display();
        let x = self.subnet;
        for sub in ["state", "log", "spool/h2", "spool/h3"] {
            std::fs::create_dir_all(self.path(sub)).unwrap();
        }
        let conf = format!(
            "ClusterName=r2e{x}\n\
             SlurmctldHost=h1({h1})\n\
             SlurmUser=root\n\
             SlurmdUser=root\n\
             AuthType=auth/munge\n\
             CredType=cred/munge\n\
             AuthInfo=socket={d}/munge/sock,cred_expire=5\n\
             ProctrackType=proctrack/linuxproc\n\
             TaskPlugin=task/none\n\
             JobAcctGatherType=jobacct_gather/none\n\
             MpiDefault=none\n\
             SchedulerType=sched/backfill\n\
             SchedulerParameters=bf_interval=1,sched_interval=2\n\
             SelectType=select/cons_tres\n\
             SelectTypeParameters=CR_Core\n\
             StateSaveLocation={d}/state\n\
             SlurmdSpoolDir={d}/spool/%n\n\
             SlurmctldPidFile={d}/slurmctld.pid\n\
             SlurmdPidFile={d}/spool/slurmd-%n.pid\n\
             SlurmctldLogFile={d}/log/slurmctld.log\n\
             SlurmdLogFile={d}/log/slurmd-%n.log\n\
             SlurmctldPort=6817\n\
             SlurmdPort=6818\n\
             ReturnToService=2\n\
             SlurmdTimeout=5\n\
             MessageTimeout=3\n\
             MinJobAge=300\n\
             JobRequeue=1\n\
             MailProg=/bin/true\n\
             NodeName=h2 NodeAddr={h2} CPUs=1 RealMemory=2000 State=UNKNOWN\n\
             NodeName=h3 NodeAddr={h3} CPUs=1 RealMemory=2000 State=UNKNOWN\n\
             PartitionName=main Nodes=h2,h3 Default=YES MaxTime=INFINITE State=UP\n",
            h1 = self.addr("h1"),
            h2 = self.addr("h2"),
            h3 = self.addr("h3"),
        );
        std::fs::write(&self.conf, conf).unwrap();
    }

    /// A command that runs `program` in `host`'s network namespace (this machine's files,
    /// processes and mounts otherwise), with this cluster's `SLURM_CONF`: a service there
    /// listens on the host's address.
    pub fn command_in(&self, host: &str, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = self.net.command_in(host, program);
        cmd.env("SLURM_CONF", &self.conf);
        cmd
    }

    /// Starts `host`'s daemon: `slurmctld` on `h1`, `slurmd` on a node (in the foreground, in
    /// the host's namespaces, named after the host).
    pub fn spawn_daemon(&self, host: &str) {
        let conf = self.conf.display();
        let daemon = if host == "h1" {
            format!("exec {} -D -f '{conf}'", sbin("slurmctld").display())
        } else {
            format!("exec {} -D -N {host} -f '{conf}'", sbin("slurmd").display())
        };
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.path(&format!("log/{host}.stderr")))
            .unwrap();
        let mut cmd = self.host_shell(host, &[], &daemon);
        cmd.env("SLURM_CONF", &self.conf)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        self.spawn(host, &mut cmd);
    }

    /// A Slurm client command (`sbatch`, `squeue`, `scontrol`, `sinfo`) for this cluster.
    pub fn slurm(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        cmd.env("SLURM_CONF", &self.conf);
        cmd
    }

    /// `sbatch --parsable ARGS`: the job id.
    pub fn sbatch(&self, args: &[&str]) -> String {
        let out = run(self.slurm("sbatch").arg("--parsable").args(args));
        out.trim().split(';').next().unwrap().to_owned()
    }

    /// `scontrol show job -o ID`: one line per job (per array task), `Key=Value` words.
    pub fn show_job(&self, id: &str) -> String {
        run(self.slurm("scontrol").args(["show", "job", "-o", id]))
    }

    /// The values of `field` (`JobState`, `NodeList`, `Restarts`...) of the job's records (one
    /// per array task, in `scontrol`'s order).
    pub fn job_field(&self, id: &str, field: &str) -> Vec<String> {
        let key = format!("{field}=");
        self.show_job(id)
            .lines()
            .filter_map(|l| {
                l.split_whitespace()
                    .find_map(|w| w.strip_prefix(&key).map(str::to_owned))
            })
            .collect()
    }

    /// Waits until no job of `ids` is pending or running (every array task ended), for at most
    /// `timeout`; then their states, one per record.
    pub fn wait_done(&self, ids: &[&str], timeout: Duration) -> Vec<String> {
        let ended = |s: &str| {
            !matches!(
                s,
                "PENDING"
                    | "RUNNING"
                    | "CONFIGURING"
                    | "COMPLETING"
                    | "REQUEUED"
                    | "SUSPENDED"
                    | "REQUEUE_HOLD"
                    | "REQUEUE_FED"
                    | "RESIZING"
            )
        };
        let states = || -> Vec<String> {
            ids.iter()
                .flat_map(|id| self.job_field(id, "JobState"))
                .collect()
        };
        let deadline = Instant::now() + timeout;
        loop {
            let now = states();
            if !now.is_empty() && now.iter().all(|s| ended(s)) {
                return now;
            }
            assert!(
                Instant::now() < deadline,
                "jobs {ids:?} still not done after {timeout:?}: {now:?}\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// Waits until every node of `nodes` is in one of `states` (`sinfo`'s `%T`: `idle`,
    /// `allocated`, `mixed`, `down*`...).
    pub fn wait_nodes(&self, nodes: &[&str], states: &[&str], timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let now = self.node_states();
            if nodes.iter().all(|n| {
                now.iter()
                    .any(|(m, s)| m == n && states.contains(&s.as_str()))
            }) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "nodes {nodes:?} not {states:?} after {timeout:?}: {now:?}\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// `sinfo`'s node states: `(node, state)`.
    pub fn node_states(&self) -> Vec<(String, String)> {
        let out = self
            .slurm("sinfo")
            .args(["-h", "-N", "-o", "%N %T"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        out.lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(n, s)| (n.to_owned(), s.trim().to_owned()))
            .collect()
    }

    /// The daemons' logs (the last lines of each), for failure messages.
    pub fn logs(&self) -> String {
        let mut text = String::new();
        for entry in walkdir::WalkDir::new(self.path("log"))
            .into_iter()
            .flatten()
        {
            if entry.file_type().is_file() {
                let body = std::fs::read_to_string(entry.path()).unwrap_or_default();
                let lines: Vec<&str> = body.lines().collect();
                text.push_str(&format!("--- {}\n", entry.path().display()));
                for l in &lines[lines.len().saturating_sub(15)..] {
                    text.push_str(l);
                    text.push('\n');
                }
            }
        }
        text
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // The hosts' daemons first (the network, dropped next, kills them again and deletes the
        // namespaces), then munged.
        for host in HOSTS {
            self.kill_host(host);
        }
        if let Some(mut munged) = self.munged.take() {
            let _ = munged.kill();
            let _ = munged.wait();
        }
    }
}

/// Waits until `ready()`, for at most `timeout`.
pub fn wait_for(timeout: Duration, what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !ready() {
        assert!(
            Instant::now() < deadline,
            "{what}: not ready after {timeout:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
