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
	scriptDequeue = loadScript("dequeue")
	scriptAck     = loadScript("ack")
	scriptRetry   = loadScript("retry")
	scriptRelease = loadScript("release")
	scriptExtend  = loadScript("extend")
	scriptSweep   = loadScript("sweep")
	scriptStats   = loadScript("stats")
	scriptList    = loadScript("list")
	scriptPause   = loadScript("pause")
)

func loadScript(name string) *redis.Script {
	priority, err := luaFS.ReadFile("lua/priority.lua")
	if err != nil {
		panic(err)
	}
	common, err := luaFS.ReadFile("lua/common.lua")
	if err != nil {
		panic(err)
	}
	body, err := luaFS.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic(err)
	}
	return redis.NewScript(string(priority) + "\n" + string(common) + "\n" + string(body))
}
