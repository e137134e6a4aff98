// System headers the Swift Glibc module does not export on Linux (epoll, TCP options).
#ifndef CBOARDNET_H
#define CBOARDNET_H
#ifdef __linux__
#include <sys/epoll.h>
#include <netinet/tcp.h>
#endif
#endif
