package redisconn

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// unknownMaster asks each sentinel of c for the address of c's master
// and returns an "unknown master" Error when at least one answered and
// every one that answered knows no master of that name; nil otherwise
// (the failure is another one, which describe explains). go-redis
// reports this case as "redis: nil", which names neither the master nor
// the sentinels.
func (c *Config) unknownMaster(ctx context.Context) error {
	t, err := c.TLSConfig()
	if err != nil {
		return nil
	}
	answered := 0
	for _, addr := range c.Addrs {
		sc := redis.NewSentinelClient(&redis.Options{
			Addr: addr, Username: c.SentinelUsername, Password: c.SentinelPassword, TLSConfig: t,
			DialTimeout: c.DialTimeout, ReadTimeout: c.ReadTimeout, WriteTimeout: c.WriteTimeout,
		})
		_, err := sc.GetMasterAddrByName(ctx, c.MasterName).Result()
		sc.Close()
		switch {
		case errors.Is(err, redis.Nil):
			answered++
		case err == nil:
			// A sentinel knows the master: the failure is elsewhere.
			return nil
		}
	}
	if answered == 0 {
		return nil
	}
	who := "redis " + strings.Join(c.Addrs, ",") + " master " + c.MasterName
	msg := fmt.Sprintf("no sentinel of %s knows a master named %q (SENTINEL GET-MASTER-ADDR-BY-NAME answered nil); check the master name, the path of the redis+sentinel:// URL",
		strings.Join(c.Addrs, ","), c.MasterName)
	return &Error{Server: who, What: "unknown master", Msg: msg, Err: redis.Nil}
}
