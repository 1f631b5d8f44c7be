// The front ends as pure functions: a request in, the bytes of its reply and the connection's
// standing out (HandleResp, HandleHttp), over a service with memory backends and a FakeClock.
#include "server/handlers.h"

#include <gtest/gtest.h>

#include "server/commands.h"
#include "server/log.h"
#include "testing/fake_clock.h"

namespace sekka::server {
namespace {

constexpr std::string_view kToken = "handlers-token-0123456789";

class HandlersTest : public ::testing::Test {
 protected:
  HandlersTest() {
    SetLogLevel("off");
    ServerConfig config = DefaultConfig();
    config.worker_source = "etcd";
    config.auth_token = std::string(kToken);
    config.allowed_hosts = {"ids.internal"};
    config.generator.layout = *ParseLayout("time_bits=41,worker_bits=2,sequence_bits=20");
    WorkerLeaseOptions lease;
    lease.identity = "a";
    lease.worker_count = 4;
    lease.clock = &clock_;
    ServiceParts parts;
    parts.clock = &clock_;
    parts.lease = registry_->NewLease(lease);
    parts.data_dir = NewMemoryDataDir();
    parts.segment_store = NewMemorySegmentStore();
    parts.machine_store = NewMemoryMachineStore();
    parts.background_thread = false;
    service_ = std::move(Service::Start(config, std::move(parts))).value();
  }

  // The reply to one RESP command on `session`; `close` says whether the connection ends.
  std::string Resp(std::vector<std::string_view> args, bool* close = nullptr) {
    std::string out;
    bool closing = false;
    HandleResp(*service_, session_, args, out, closing);
    if (close != nullptr) *close = closing;
    return out;
  }

  std::string Http(http::Request request, bool* close = nullptr) {
    std::string out;
    bool closing = false;
    HandleHttp(*service_, session_, request, out, closing);
    if (close != nullptr) *close = closing;
    return out.substr(0, out.find("\r\n"));
  }

  FakeClock clock_{1'800'000'000'000};
  std::unique_ptr<WorkerLeaseRegistry> registry_ = NewMemoryWorkerLeaseRegistry(&clock_);
  std::unique_ptr<Service> service_;
  Session session_;
};

TEST_F(HandlersTest, BeforeAuthOnlyAuthHelloAndQuitAnswer) {
  EXPECT_EQ(Resp({"ID.NEXT"}), "-NOAUTH Authentication required.\r\n");
  EXPECT_EQ(Resp({"PING"}), "-NOAUTH Authentication required.\r\n");
  EXPECT_EQ(Resp({"NOSUCH"}), "-NOAUTH Authentication required.\r\n");
  EXPECT_EQ(Resp({"AUTH", kToken}), "+OK\r\n");
  EXPECT_TRUE(session_.authenticated);
  EXPECT_EQ(Resp({"PING"}), "+PONG\r\n");
  EXPECT_EQ(Resp({"ID.NEXT"}).front(), ':');
}

TEST_F(HandlersTest, WrongCredentialsAreTheConnectionsLastReply) {
  bool close = false;
  EXPECT_EQ(Resp({"AUTH", "guess-0000000000000"}, &close),
            "-WRONGPASS invalid username-password pair or user is disabled.\r\n");
  EXPECT_TRUE(close);
  EXPECT_TRUE(session_.auth_failed);
  session_ = {};
  EXPECT_EQ(Resp({"HELLO", "2", "AUTH", "default", "guess"}, &close).substr(0, 10), "-WRONGPASS");
  EXPECT_TRUE(close && session_.auth_failed);
  session_ = {};
  // One rule for AUTH and HELLO: the user "default" (or none) and the token.
  EXPECT_EQ(Resp({"AUTH", "bob", kToken}, &close).substr(0, 10), "-WRONGPASS");
  session_ = {};
  EXPECT_EQ(Resp({"HELLO", "2", "AUTH", "default", kToken}).substr(0, 4), "*14\r");
  EXPECT_FALSE(session_.auth_failed);
}

// Second review of issue 24: a web page's POST to the RESP port ran its body as commands.
TEST_F(HandlersTest, AnHttpRequestLineOrHostHeaderEndsARespConnectionUnanswered) {
  for (const std::vector<std::string_view>& args :
       {std::vector<std::string_view>{"POST", "/", "HTTP/1.1"},
        std::vector<std::string_view>{"Host:", "127.0.0.1:6380"},
        std::vector<std::string_view>{"host:"}}) {
    bool close = false;
    EXPECT_EQ(Resp(args, &close), "");
    EXPECT_TRUE(close);
  }
}

// Review of issue 41: a connection command is a row of the table without a handler; one
// without its case in the RESP front end would be listed by COMMAND and answered "unknown".
TEST_F(HandlersTest, EveryConnectionCommandOfTheTableIsRunByRespNotUnknown) {
  session_.authenticated = true;
  int connection_rows = 0;
  for (const CommandSpec& spec : Commands()) {
    if (spec.run != nullptr) continue;
    ++connection_rows;
    const std::string reply = Resp({spec.name});
    EXPECT_EQ(reply.find("unknown command"), std::string::npos) << spec.name << ": " << reply;
    session_ = {};
    session_.authenticated = true;
  }
  EXPECT_EQ(connection_rows, 13);
}

TEST_F(HandlersTest, ConnectionCommandsAnswerAsRedisDoes) {
  session_.authenticated = true;
  EXPECT_EQ(Resp({"HELLO", "abc"}), "-ERR Protocol version is not an integer or out of range\r\n");
  EXPECT_EQ(Resp({"HELLO", "3"}), "-NOPROTO sorry, this protocol version is not supported\r\n");
  EXPECT_EQ(Resp({"CLIENT", "SETNAME", "a b"}),
            "-ERR Client names cannot contain spaces, newlines or special characters.\r\n");
  EXPECT_EQ(Resp({"CLIENT", "SETNAME", "app"}), "+OK\r\n");
  EXPECT_EQ(Resp({"CLIENT", "GETNAME"}), "$3\r\napp\r\n");
  EXPECT_EQ(Resp({"ECHO", "hi"}), "$2\r\nhi\r\n");
  EXPECT_EQ(Resp({"SELECT", "1"}), "-ERR DB index is out of range\r\n");
  EXPECT_EQ(Resp({"INCRBY", "t", "5"}).substr(0, 36), "-ERR INCRBY on a segment tag takes a");
  EXPECT_EQ(Resp({"NOSUCH", "x"}),
            "-ERR unknown command 'NOSUCH', with args beginning with: 'x' \r\n");
  EXPECT_EQ(Resp({"ID.REPLY", "STRING"}), "+OK\r\n");
  EXPECT_EQ(Resp({"ID.NEXT"}).front(), '$');
  bool close = false;
  EXPECT_EQ(Resp({"QUIT"}, &close), "+OK\r\n");
  EXPECT_TRUE(close);
}

http::Request Get(std::string target, std::string authorization = "") {
  http::Request r;
  r.method = "GET";
  r.target = std::move(target);
  r.authorization = std::move(authorization);
  r.host = "127.0.0.1:8080";
  return r;
}

TEST_F(HandlersTest, HttpCredentialsAuthenticateOrEndTheConnection) {
  bool close = false;
  EXPECT_EQ(Http(Get("/v1/id"), &close), "HTTP/1.1 401 Unauthorized");
  EXPECT_FALSE(close || session_.auth_failed);  // no credentials: no guess
  EXPECT_EQ(Http(Get("/v1/id", "Bearer guess-000000000000"), &close), "HTTP/1.1 401 Unauthorized");
  EXPECT_TRUE(close && session_.auth_failed);
  session_ = {};
  // Review of issue 24: tinyid refuses a wrong ?token= with a 200 in its shape, and an open
  // route answers whatever the credentials; a wrong one is a guess all the same.
  EXPECT_EQ(Http(Get("/tinyid/id/nextId?bizType=a&token=guess-00000000000"), &close),
            "HTTP/1.1 200 OK");
  EXPECT_TRUE(close && session_.auth_failed);
  session_ = {};
  EXPECT_EQ(Http(Get("/healthz", "Token guess-00000000000"), &close), "HTTP/1.1 200 OK");
  EXPECT_TRUE(close && session_.auth_failed);
  session_ = {};
  EXPECT_EQ(Http(Get("/v1/id", "Bearer " + std::string(kToken)), &close), "HTTP/1.1 200 OK");
  EXPECT_TRUE(session_.authenticated);
  EXPECT_FALSE(close);
}

TEST_F(HandlersTest, BrowserBorneRequestsAreRefused) {
  const std::string bearer = "Bearer " + std::string(kToken);
  for (const char* host : {"evil.example", "evil.example:8080", "ids.internal.evil.example",
                           "127.0.0.1:80@evil.example", "[::1]evil.example", "127.0.0.1:x"}) {
    http::Request r = Get("/healthz");
    r.host = host;
    EXPECT_EQ(Http(r), "HTTP/1.1 403 Forbidden") << host;
  }
  for (const char* host : {"", "127.0.0.1", "[::1]:8080", "localhost:1", "IDS.internal:80"}) {
    http::Request r = Get("/healthz");
    r.host = host;
    EXPECT_EQ(Http(r), "HTTP/1.1 200 OK") << host;
  }
  http::Request post = Get("/machines/ns?instanceId=a&machineBit=1", bearer);
  post.method = "POST";
  post.origin = "http://evil.example";
  EXPECT_EQ(Http(post), "HTTP/1.1 403 Forbidden");
  post.origin = "null";
  EXPECT_EQ(Http(post), "HTTP/1.1 403 Forbidden");
  post.origin = "http://127.0.0.1:8080";
  EXPECT_NE(Http(post), "HTTP/1.1 403 Forbidden");
  // Issue 42: a GET that hands out ids is refused too (CORS hides the reply, not the ids it
  // took), whichever header tells; one that only reads is not.
  http::Request get = Get("/v1/id", bearer);
  get.origin = "http://127.0.0.2:8080";
  EXPECT_EQ(Http(get), "HTTP/1.1 403 Forbidden");
  get.origin = "";
  get.fetch_site = "same-site";  // another port of the same host is another origin
  EXPECT_EQ(Http(get), "HTTP/1.1 403 Forbidden");
  get.fetch_site = "same-origin";
  EXPECT_EQ(Http(get), "HTTP/1.1 200 OK");
  get.fetch_site = "";
  get.referer = "http://127.0.0.1:9/page";
  EXPECT_EQ(Http(get), "HTTP/1.1 403 Forbidden");
  http::Request decode = Get("/v1/decode/1", bearer);
  decode.fetch_site = "cross-site";
  EXPECT_EQ(Http(decode), "HTTP/1.1 200 OK");
}

}  // namespace
}  // namespace sekka::server
