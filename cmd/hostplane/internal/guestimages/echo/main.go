// Command echo is the example workload of guest clusters on real nodes (hostplane dev pushes
// it to its registry as hostplane/echo), so that Services and DNS can be checked from inside
// a cluster with no shell image:
//
//	echo                  serves HTTP on :8080 ($PORT), answering its pod's name
//	                      ($POD_NAME, else the hostname) and a newline
//	echo URL              GETs URL and prints the answer (exit 1 on an error or non-2xx)
//	echo -every 1s URL    does so every second until stopped
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	every := flag.Duration("every", 0, "with a URL: fetch it again at this interval until stopped")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if url := flag.Arg(0); url != "" {
		for {
			err := fetch(ctx, url)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
			if *every <= 0 {
				if err != nil {
					os.Exit(1)
				}
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(*every):
			}
		}
	}
	serve(ctx)
}

func fetch(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	fmt.Print(string(b))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

func serve(ctx context.Context) {
	host, _ := os.Hostname()
	name := cmp.Or(os.Getenv("POD_NAME"), host)
	addr := ":" + cmp.Or(os.Getenv("PORT"), "8080")
	srv := &http.Server{Addr: addr, ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.Printf("%s %s from %s", r.Method, r.URL.Path, r.RemoteAddr)
		fmt.Fprintln(w, name)
	})}
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown(context.Background())
	}()
	log.Printf("serving %s on %s", name, addr)
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		log.Fatal(err)
	}
}
