// backends/coordinator_access.h
//
// How sekka proves who it is to a worker-id coordinator ([worker] tls_* and username/password):
// TLS and a user for etcd, a digest user for ZooKeeper (Debian's ZooKeeper client has no TLS).

#ifndef SEKKA_BACKENDS_COORDINATOR_ACCESS_H_
#define SEKKA_BACKENDS_COORDINATOR_ACCESS_H_

#include <string>

#include "backends/http_client.h"

namespace sekka {

struct CoordinatorAccess {
  TlsSettings tls;       // no CA file: plain HTTP (etcd only)
  std::string username;  // "" = no authentication
  std::string password;
};

}  // namespace sekka

#endif  // SEKKA_BACKENDS_COORDINATOR_ACCESS_H_
