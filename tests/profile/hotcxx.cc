// A C++ program whose time goes to one member function, shapes::Grid::lrem(long, long)
// (mangled _ZN6shapes4Grid4lremEll): run.sh's demangle scenario profiles it. MS as argv[1].
#include <chrono>
#include <cstdlib>

namespace shapes {
struct Grid {
	long seed;
	long lrem(long n, long m);
};

// Not inlined into main: its own frame, its own symbol.
__attribute__((noinline)) long Grid::lrem(long n, long m)
{
	long x = seed;

	for (long i = 0; i < n; i++)
		x = (x * 31 + i) % m;
	return x;
}
} // namespace shapes

// Kept, not printed: the profile's report is on the same standard output.
volatile long sink;

int main(int argc, char **argv)
{
	auto end = std::chrono::steady_clock::now() +
		   std::chrono::milliseconds(argc > 1 ? std::atol(argv[1]) : 1000);
	shapes::Grid g{ 7 };
	long sum = 0;

	while (std::chrono::steady_clock::now() < end)
		sum += g.lrem(200000, 1000003);
	sink = sum;
	return 0;
}
