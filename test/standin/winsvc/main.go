//go:build windows

// Command winsvc is a TEST STAND-IN, not a product binary: the smallest
// Windows service (golang.org/x/sys/windows/svc) that starts, reports
// Running, stops on Stop or Shutdown, and appends one JSON line per event to
// a marker file so tests can see it ran and with which arguments.
//
//	winsvc -service -marker C:\path\marker.log [-name NAME] [-exit-delay 1s] [-- extra args]
//
// -service forces service mode: under Wine svc.IsWindowsService() is false.
// Without it (and outside the SCM) it runs in the foreground until killed.
// -exit-delay keeps the process alive after it reported Stopped, so a test
// can tell whether a stop waited for the process to exit.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"golang.org/x/sys/windows/svc"
)

var marker string

func mark(event string) {
	if marker == "" {
		return
	}
	line, _ := json.Marshal(map[string]any{"event": event, "pid": os.Getpid(), "args": os.Args[1:]})
	f, err := os.OpenFile(marker, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "winsvc:", err)
		return
	}
	f.Write(append(line, '\n'))
	f.Sync()
	f.Close()
}

type handler struct{}

func (handler) Execute(_ []string, r <-chan svc.ChangeRequest, s chan<- svc.Status) (bool, uint32) {
	s <- svc.Status{State: svc.StartPending}
	mark("start")
	s <- svc.Status{State: svc.Running, Accepts: svc.AcceptStop | svc.AcceptShutdown}
	for c := range r {
		switch c.Cmd {
		case svc.Interrogate:
			s <- c.CurrentStatus
		case svc.Stop, svc.Shutdown:
			s <- svc.Status{State: svc.StopPending}
			mark("stop")
			return false, 0
		}
	}
	return false, 0
}

func main() {
	service := flag.Bool("service", false, "run as a service even if not detected as one")
	name := flag.String("name", "winsvc", "service name")
	exitDelay := flag.Duration("exit-delay", 0, "stay alive this long after reporting Stopped")
	flag.StringVar(&marker, "marker", "", "file to append events to")
	flag.Parse()

	isService, _ := svc.IsWindowsService()
	if *service || isService {
		if err := svc.Run(*name, handler{}); err != nil {
			mark("error: " + err.Error())
			os.Exit(1)
		}
		time.Sleep(*exitDelay)
		mark("exit")
		return
	}
	mark("console")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	<-sig
	mark("exit")
}
