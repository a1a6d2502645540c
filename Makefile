# Developer shortcuts; the README's two scripts are what users and CI run.
.PHONY: dev pure test bench demo
dev:
	.venv/bin/pip install -q --no-build-isolation -e .
pure:
	FASTMQ_NO_EXTENSIONS=1 .venv/bin/pip install -q --no-build-isolation -e .
test:
	./scripts/test.sh
bench:
	scripts/bench.sh
demo:
	./scripts/demo.sh
