"""A communicator written by a user, chosen with APGAS_COMMUNICATOR=custom_comm:FileCommunicator.

It reads orders from the file named by ORDERS_FILE (one protocol line each) and appends what
happened to RESULTS_FILE: supporting another scheduler is one subclass, nothing else."""

import os
import threading
import time

from apgaspy.elastic import MalleableCommunicator
from apgaspy.wire.protocol import parse_order


class FileCommunicator(MalleableCommunicator):
    def __init__(self):
        self.orders = os.environ["ORDERS_FILE"]
        self.results = os.environ["RESULTS_FILE"]
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.play, daemon=True)

    def start(self):
        self.notify("started")
        self.thread.start()

    def stop(self):
        self.stopping.set()
        self.thread.join()
        self.notify("stopped")

    def notify(self, message):
        with open(self.results, "a") as fh:
            fh.write(message + "\n")

    def play(self):
        with open(self.orders) as fh:
            lines = [line for line in fh if line.strip()]
        for line in lines:
            time.sleep(0.3)  # paces on purpose: orders come while the program computes
            order = parse_order(line)
            if order.kind == "grow":
                report = self.grow(order.hosts)
                self.notify(f"grew {[p.id for p in report.places]}")
            else:
                report = self.shrink(order.n)
                self.notify(f"released {report.host_names}")
