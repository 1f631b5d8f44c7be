# Twitter Snowflake's service, as its IDL declared it (and as the issue quotes it): the
# client side of the Thrift tests is generated from this file by Debian's thrift-compiler.
namespace java com.twitter.service.snowflake.gen
namespace rb Snowflake

service Snowflake {
  i64 get_worker_id()
  i64 get_timestamp()
  i64 get_id(1:string useragent)
  i64 get_datacenter_id()
}
