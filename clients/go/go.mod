module sekka.dev/go/sekka

go 1.19
