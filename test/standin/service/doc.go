// Command service is a TEST STAND-IN, not a product binary: one program
// standing in for every payload service that wsu only installs, starts and
// stops (containerd.exe, kube-proxy.exe, csi-proxy.exe, windows_exporter.exe)
// and for the files it only copies (containerd-shim-runhcs-v1.exe, the CNI
// plugins). It does none of their work.
//
// It accepts any arguments, as the playbooks pass the real command lines
// (`--config C:\k\kube-proxy.conf --windows-service`,
// `-log_file=C:\... -windows-service --v=2`, containerd's
// `--config ... --run-service ...`), and fails like a real service when a
// file named by --config (or --config=, -config) is missing: exit status 1
// with the reason.
//
// Linux build (the simulated host, agent/platform/sim): with WSU_SIM_ROOT
// set, Windows paths are translated through the simulation. It logs its
// argv and a start line to stdout (which the simulation keeps in
// root/logs/<service>.log) and to the --log-file / -log_file / --logfile
// file when its directory exists, then runs until SIGTERM or SIGINT and
// exits 0.
//
// Windows build (Wine): it always tries the service dispatcher first, since
// under Wine svc.IsWindowsService() is false even when services.exe started
// it, and runs in the foreground when there is no service controller to
// connect to (Wine 8 takes about 10 s to report that; Windows answers at
// once). Either way it appends JSON lines {"event", "pid", "args"} to
// <executable>.standin.log beside itself, so tests can see that it ran and
// with which arguments.
package main
