package queue

import (
	"embed"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFS embed.FS

// Each script is lua/priority.lua and lua/common.lua followed by its own
// file. redis.Script
// runs EVALSHA and falls back to EVAL once per server that lacks it.
var (
	scriptEnqueue = loadScript("enqueue")
	scriptDequeue = loadScript("dequeue", "limits", "keyed", "routed")
	scriptAck     = loadScript("ack", "keyed", "routed")
	scriptRoute   = loadScript("route", "keyed")
	scriptRetry   = loadScript("retry", "keyed")
	scriptRelease = loadScript("release", "keyed")
	scriptExtend  = loadScript("extend")
	scriptSweep   = loadScript("sweep")
	scriptStats   = loadScript("stats", "routed")
	scriptList    = loadScript("list", "routed")
	scriptPause   = loadScript("pause")
	scriptKeyHeld = loadScript("keyheld", "keyed")
)

// loadScript builds a script from the files of lua/: priority.lua and
// common.lua first (their local functions), then helpers, more files of
// local functions, then the script's own name.lua.
func loadScript(name string, helpers ...string) *redis.Script {
	src := ""
	for _, f := range append(append([]string{"priority", "common"}, helpers...), name) {
		b, err := luaFS.ReadFile("lua/" + f + ".lua")
		if err != nil {
			panic(err)
		}
		src += string(b) + "\n"
	}
	return redis.NewScript(src)
}
