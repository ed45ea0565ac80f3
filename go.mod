module lemon

go 1.26.0

require (
	github.com/BurntSushi/toml v1.6.0 // indirect
	github.com/gorilla/websocket v1.5.3 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	github.com/tetratelabs/wazero v1.12.0 // indirect
	go.etcd.io/bbolt v1.5.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/time v0.16.0 // indirect
)
