// Node --perf-prof: a hot function V8 compiles, run for argv[2] milliseconds.
function hotLoop(n) {
	let s = 0;
	for (let i = 0; i < n; i++)
		s += i % 7;
	return s;
}
const end = Date.now() + Number(process.argv[2] || 3000);
let t = 0;
while (Date.now() < end)
	t += hotLoop(100000);
console.log(process.pid, t > 0);
