# examples/examples.mk — the sample application and `make demo`.
DEMO_APP := $(BUILD)/examples/serving_demo

$(DEMO_APP): $(BUILD)/obj/examples/serving_demo.o $(FAKEACL_LIB)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $< -L$(FAKEACL_DIR) -lascendcl -Wl,-rpath,'$$ORIGIN/../fakeacl' $(LDFLAGS) -ldl

ALL_TARGETS += $(DEMO_APP)

.PHONY: demo
demo: all
	@bash examples/demo.sh $(BUILD)
