# mk/man.mk — the manual pages docs/man/npupool.1 and docs/man/npupool.7 (included by the top
# Makefile).  They are generated from the command tables and the option table (mk/man.sh), and
# kept in the tree, so `make install` and cross builds copy them without running anything built;
# tests/cases/docs_man.sh fails when they differ from what `make man` would write.
MANGEN := $(BUILD)/tests/mangen

$(BUILD)/obj/mk/mangen.o: INC := $(TOOLS_INC)
$(MANGEN): $(BUILD)/obj/mk/mangen.o $(filter-out $(BUILD)/obj/tools/main.o,$(TOOLS_CMD_OBJS)) \
           $(TOOLS_LIB_OBJS) $(POOL_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(TOOLS_LDLIBS)

ALL_TARGETS += $(MANGEN)

.PHONY: man
man: $(MANGEN) $(BUILD)/tests/unit/test_shim_options
	sh mk/man.sh $(BUILD) docs/man
