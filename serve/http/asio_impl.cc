// Asio's and Beast's own code, compiled once for the library (BOOST_ASIO_SEPARATE_COMPILATION,
// BOOST_BEAST_SEPARATE_COMPILATION): the other translation units only see declarations,
// which keeps rebuilds of this library cheap on a small machine.
#include <boost/asio/impl/src.hpp>
#include <boost/asio/ssl/impl/src.hpp>
#include <boost/beast/src.hpp>
