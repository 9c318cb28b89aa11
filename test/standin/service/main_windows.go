//go:build windows

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"

	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/svc"
)

var markerMu sync.Mutex

// mark appends one event to <executable>.standin.log.
func mark(event string) {
	markerMu.Lock()
	defer markerMu.Unlock()
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "service stand-in:", err)
		return
	}
	line, _ := json.Marshal(map[string]any{"event": event, "pid": os.Getpid(), "args": os.Args[1:]})
	f, err := os.OpenFile(exe+".standin.log", os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "service stand-in:", err)
		return
	}
	defer f.Close()
	f.Write(append(line, '\n'))
	f.Sync()
}

// check is what a real service does before it reports Running: read its
// configuration.
func check() error {
	configs, err := flagValues(os.Args[1:], configFlags...)
	if err != nil {
		return err
	}
	for _, c := range configs {
		fi, err := os.Stat(c)
		if err == nil && fi.IsDir() {
			err = fmt.Errorf("%s is a directory", c)
		}
		if err != nil {
			return fmt.Errorf("cannot load config %s: %w", c, err)
		}
	}
	return nil
}

type handler struct{}

func (handler) Execute(_ []string, r <-chan svc.ChangeRequest, s chan<- svc.Status) (bool, uint32) {
	s <- svc.Status{State: svc.StartPending}
	if err := check(); err != nil {
		mark("error: " + err.Error())
		return true, 1 // a service-specific exit code, as a failed start reports
	}
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
	// Always try the dispatcher: under Wine svc.IsWindowsService() is false
	// even under services.exe. For a process the SCM did not start it fails
	// at once with ERROR_FAILED_SERVICE_CONTROLLER_CONNECT.
	err := svc.Run(serviceName(), handler{})
	if err == nil {
		mark("exit")
		return
	}
	if !errors.Is(err, windows.ERROR_FAILED_SERVICE_CONTROLLER_CONNECT) {
		mark("error: " + err.Error())
		os.Exit(1)
	}
	if err := check(); err != nil {
		mark("error: " + err.Error())
		fmt.Fprintln(os.Stderr, serviceName()+":", err)
		os.Exit(1)
	}
	mark("console")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	<-sig
	mark("exit")
}
