package main

import (
	"reflect"
	"testing"
)

func TestGroupBySocket(t *testing.T) {
	got := groupBySocket([]string{
		"http://127.0.0.1:2379", "https://127.0.0.1:2379",
		"https://10.0.0.1:2379",
		"unix://s.sock", "unixs://s.sock",
		"http://localhost:2379",
	})
	want := [][]string{
		{"http://127.0.0.1:2379", "https://127.0.0.1:2379"},
		{"https://10.0.0.1:2379"},
		{"unix://s.sock", "unixs://s.sock"},
		{"http://localhost:2379"}, // another host string: its own listener, as in etcd
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("groups %q, want %q", got, want)
	}
}
