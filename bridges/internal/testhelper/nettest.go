package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// nettest is what the network tests run inside a jail, where no python3 or socat can be assumed:
//
//	nettest connect NETWORK ADDR TOKEN   dial (unix: "@name" is abstract), send TOKEN\n; prints CONNECTED
//	nettest listen  NETWORK ADDR SECONDS accept for SECONDS; prints each token received as GOT <token>
//	nettest get     URL                  download URL; prints the byte count
//
// The exit status is 0 when the operation worked, 1 when it did not (the error on stderr).
func nettest(args []string) int {
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: nettest connect|listen|get ...")
		return 2
	}
	switch {
	case args[0] == "connect" && len(args) == 4:
		c, err := net.DialTimeout(args[1], args[2], 3*time.Second)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer c.Close()
		if _, err := fmt.Fprintln(c, args[3]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println("CONNECTED")
		return 0
	case args[0] == "listen" && len(args) == 4:
		secs, _ := strconv.Atoi(args[3])
		ln, err := net.Listen(args[1], args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		got := make(chan string, 64)
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					c.SetDeadline(time.Now().Add(2 * time.Second))
					line, _ := bufio.NewReader(c).ReadString('\n')
					got <- strings.TrimSpace(line)
				}()
			}
		}()
		deadline := time.After(time.Duration(secs) * time.Second)
		for {
			select {
			case tok := <-got:
				fmt.Println("GOT " + tok)
			case <-deadline:
				ln.Close()
				return 0
			}
		}
	case args[0] == "get" && len(args) == 2:
		resp, err := http.Get(args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer resp.Body.Close()
		n, err := io.Copy(io.Discard, resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			fmt.Fprintln(os.Stderr, resp.Status, err)
			return 1
		}
		fmt.Println(n)
		return 0
	}
	fmt.Fprintln(os.Stderr, "nettest: bad arguments:", args)
	return 2
}
